#!/usr/bin/env bash
# Training quality with ZeRO++ on the default task: 4 ranks as 2 nodes x 2, ZeRO-3 with and without
# qwZ + qgZ + hpZ, same seed and steps. What must not happen is a worse model: the quantized run's
# held-out exact match at most 2 points lower and its held-out eval_loss at most 1.5x the plain run's;
# its last logged training loss (the fit it ends with) at most 1.5x; its train_loss (the mean over the
# run) at most 6% above; its inter-node bytes at most 0.3x.
# The train_loss bound is wide because this task learns through a sharp transition in its first logged
# window (loss ~5.6 -> ~0.1), whose timing moves with any rounding difference, and that window is most
# of the run's mean. Measured ZeRO++ / plain train_loss at lr 1.5e-3, seeds 42-45 each:
#   2026-11-21: 1.013 (seed 42), 1.043 (seed 43)
#   2026-11-29, cross-entropy on its team kernels: 0.999 0.979 1.013 0.986, and after a change to the
#               attention's sum order only: 0.996 0.969 0.972 0.972
#   2026-11-29, cross-entropy on AVX-512 rows: 1.033 1.026 1.017 1.023, and after the same change:
#               1.027 0.994 0.995 1.013; before it, the rows with libm's exp per lane: 1.013 1.018 1.001
#               0.994
# so 0.97-1.04 is one kernel's spread over seeds (plain fp32 runs at 1 and 2 ranks differ by ~7%), not a
# worse model: every one of those runs ended at exact match 1.0 and eval_loss 2.5e-4 to 3.2e-4; the
# eight whose logs were kept, at a last window 0.91-1.05x plain's. A broken reduction does not hide in
# that spread (dequantized gradients written over each other instead of added: train_loss 3.9x, last
# window 960x, exact match 0.565).
# Learning rate 1.5e-3 (the recipe's since 2026-11-21; it was 3e-3): at 3e-3 the outcome itself was a
# draw (seed 42 exact match 0.925 vs 0.995 plain; seed 43 1.0 vs 1.0 but train_loss +4.2 %).
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
    last = [l["loss"] for l in steps if "loss" in l][-1]
    return lines[-1], inter, last
plain, plain_inter, plain_last = load(sys.argv[1])
zpp, zpp_inter, zpp_last = load(sys.argv[2])
print(f"plain ZeRO-3: train_loss {plain['train_loss']:.5f} last window {plain_last:.3g} eval_loss {plain['eval_loss']:.3g} exact_match {plain['eval_exact_match']:.3f} inter-node {plain_inter:.0f} B/step")
print(f"ZeRO++:       train_loss {zpp['train_loss']:.5f} last window {zpp_last:.3g} eval_loss {zpp['eval_loss']:.3g} exact_match {zpp['eval_exact_match']:.3f} inter-node {zpp_inter:.0f} B/step")
assert zpp["train_loss"] <= 1.06 * plain["train_loss"], "train_loss more than 6% above the plain run"
assert zpp_last <= 1.5 * plain_last, "last logged training loss more than 1.5x the plain run's"
assert zpp["eval_exact_match"] >= plain["eval_exact_match"] - 0.02, "exact match more than 2 points lower"
assert zpp["eval_loss"] <= 1.5 * plain["eval_loss"], "held-out eval_loss more than 1.5x the plain run's"
assert zpp_inter <= 0.3 * plain_inter, "inter-node bytes not reduced to 0.3x"
print("zero_plus_plus_quality: ok")
PY
