#!/usr/bin/env bash
# Training quality with ZeRO++ on the default task: 4 ranks as 2 nodes x 2, ZeRO-3 with and without
# qwZ + qgZ + hpZ, same seed and steps. The quantized run's train_loss is no more than 2% above the
# plain run's and its held-out exact match at most 2 points lower; its inter-node bytes are at most 0.3x.
# One-sided on the loss: this task learns through a sharp transition whose timing moves with any
# rounding difference (plain fp32 runs at 1 and 2 ranks already differ by ~7% in train_loss), so the
# quantized run may land on either side; what must not happen is a worse model.
# Learning rate 1.5e-3 (the recipe's since 2026-11-21; it was 3e-3): at 3e-3 the outcome is one draw of a chaotic
# process and this one-sample comparison measured the draw, not ZeRO++. Measured 2026-11-21 (4 ranks,
# memory-efficient attention), ZeRO++ vs plain:
#   lr 3e-3:   seed 42 exact match 0.925 vs 0.995 (eval_loss 0.052 vs 0.0049); seed 43 1.0 vs 1.0 but
#              train_loss +4.2 %; ZeRO++ seed 44 1.0; seed 42 with eager attention 1.0
#   lr 1.5e-3: seed 42 train_loss 0.2631 vs 0.2666, eval_loss 2.9e-4 vs 2.7e-4, exact match 1.0 vs 1.0;
#              seed 43 0.2349 vs 0.2449, 3.0e-4 vs 3.2e-4, 1.0 vs 1.0
# The held-out eval_loss is checked too (<= 1.5x plain): at 1.5e-3 it is the steadiest quality figure.
# Usage: zero_plus_plus_quality.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
common=(train --config jobs/recipes/default.yaml --per_device_train_batch_size 4 --ranks_per_node 2
        --zero_stage 3 --logging_steps 250 --learning_rate 1.5e-3)
run() {
  timeout 600 mpirun -np 4 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" "${common[@]}" "$@" \
    > "$tmp/$name.log" 2>&1 || { tail -20 "$tmp/$name.log"; fail "$name run failed"; }
}
name=plain run --output_dir "$tmp/plain"
name=zpp run --output_dir "$tmp/zpp" --zero_hpz_partition_size 2 --zero_quantized_weights --zero_quantized_gradients
python3 - "$tmp/plain/metrics.jsonl" "$tmp/zpp/metrics.jsonl" <<'PY'
import json, sys
def load(p):
    lines = [json.loads(l) for l in open(p)]
    steps = lines[:-1]
    inter = sum(l["comm_bytes_inter_node"] for l in steps) / len(steps)
    return lines[-1], inter
plain, plain_inter = load(sys.argv[1])
zpp, zpp_inter = load(sys.argv[2])
print(f"plain ZeRO-3: train_loss {plain['train_loss']:.5f} eval_loss {plain['eval_loss']:.3g} exact_match {plain['eval_exact_match']:.3f} inter-node {plain_inter:.0f} B/step")
print(f"ZeRO++:       train_loss {zpp['train_loss']:.5f} eval_loss {zpp['eval_loss']:.3g} exact_match {zpp['eval_exact_match']:.3f} inter-node {zpp_inter:.0f} B/step")
assert zpp["train_loss"] <= 1.02 * plain["train_loss"], "train_loss more than 2% above the plain run"
assert zpp["eval_exact_match"] >= plain["eval_exact_match"] - 0.02, "exact match more than 2 points lower"
assert zpp["eval_loss"] <= 1.5 * plain["eval_loss"], "held-out eval_loss more than 1.5x the plain run's"
assert zpp_inter <= 0.3 * plain_inter, "inter-node bytes not reduced to 0.3x"
print("zero_plus_plus_quality: ok")
PY
