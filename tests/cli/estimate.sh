#!/usr/bin/env bash
# `shardft estimate` reproduces DeepSpeed's estimate_zero3_model_states_mem_needs_all_live for the
# Llama-3-8B body DeepSpeed prints as "7504M total params, 525M largest layer params" (exactly
# 7504924672 and 525336576: LlamaModel without lm_head, and its embedding), 1 node x 8 GPUs.
# Usage: estimate.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
out=$("$bin" estimate --total_params 7504924672 --largest_layer_params 525336576 --gpus_per_node 8 --nodes 1) \
  || fail "estimate exited non-zero"
echo "$out"
grep -q "SW: Model with 7504M total params, 525M largest layer params." <<<"$out" || fail "no SW line"
while IFS='|' read -r cpu gpu opts; do
  line=$(grep -F -- "$opts" <<<"$out" | sed -n '/offload_param/p' | head -1)
  got_cpu=$(awk -F'|' '{gsub(/ /,"",$1); print $1}' <<<"$line")
  got_gpu=$(awk -F'|' '{gsub(/ /,"",$2); print $2}' <<<"$line")
  [ "$got_cpu" = "$cpu" ] && [ "$got_gpu" = "$gpu" ] || fail "$opts: expected $cpu | $gpu, got '$line'"
done <<'ROWS'
188.72GB|1.96GB|offload_param=cpu , offload_optimizer=cpu , zero_init=1
335.50GB|1.96GB|offload_param=cpu , offload_optimizer=cpu , zero_init=0
167.75GB|3.70GB|offload_param=none, offload_optimizer=cpu , zero_init=1
335.50GB|3.70GB|offload_param=none, offload_optimizer=cpu , zero_init=0
23.48GB|17.68GB|offload_param=none, offload_optimizer=none, zero_init=1
335.50GB|17.68GB|offload_param=none, offload_optimizer=none, zero_init=0
ROWS

out=$("$bin" estimate --config jobs/recipes/default.yaml --gpus_per_node 2 --micro_batch 4 --seq_len 128) || fail "estimate from a recipe failed"
grep -q "Activations kept for backward per rank, micro-batch 4 x 128 tokens" <<<"$out" || fail "no activation line"
# Traffic rows: ZeRO++ sends well under 0.3x of ZeRO-3's inter-node bytes on 4 nodes x 8.
out=$("$bin" estimate --total_params 7B --largest_layer_params 525M --gpus_per_node 8 --nodes 4 --bf16) || fail "traffic estimate failed"
python3 - "$out" <<'PY' || fail "traffic rows"
import re, sys
rows = {m.group(1).strip(): (float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"^\s+(stage .*?)\s+intra-node\s+([\d.]+)GB\s+inter-node\s+([\d.]+)GB", sys.argv[1], re.M)}
z3 = rows["stage 3 (2 all-gathers + reduce-scatter)"][1]
zpp = rows["stage 3 ZeRO++ (qwZ + hpZ + qgZ)"][1]
# 3 psi (N-1)/N x 2 bytes for plain ZeRO-3
assert abs(z3 - 3 * 7e9 * 31 / 32 * 2 / 2**30) < 0.01, z3
assert zpp <= 0.3 * z3, (zpp, z3)
print(f"traffic: ZeRO-3 {z3} GB inter-node, ZeRO++ {zpp} GB ({zpp / z3:.3f}x)")
PY
"$bin" estimate --total_params lots --largest_layer_params 5M > /dev/null 2>&1 && fail "a bad count was accepted"
msg=$(# Traffic rows: ZeRO++ sends well under 0.3x of ZeRO-3's inter-node bytes on 4 nodes x 8.
out=$("$bin" estimate --total_params 7B --largest_layer_params 525M --gpus_per_node 8 --nodes 4 --bf16) || fail "traffic estimate failed"
python3 - "$out" <<'PY' || fail "traffic rows"
import re, sys
rows = {m.group(1).strip(): (float(m.group(2)), float(m.group(3)))
        for m in re.finditer(r"^\s+(stage .*?)\s+intra-node\s+([\d.]+)GB\s+inter-node\s+([\d.]+)GB", sys.argv[1], re.M)}
z3 = rows["stage 3 (2 all-gathers + reduce-scatter)"][1]
zpp = rows["stage 3 ZeRO++ (qwZ + hpZ + qgZ)"][1]
# 3 psi (N-1)/N x 2 bytes for plain ZeRO-3
assert abs(z3 - 3 * 7e9 * 31 / 32 * 2 / 2**30) < 0.01, z3
assert zpp <= 0.3 * z3, (zpp, z3)
print(f"traffic: ZeRO-3 {z3} GB inter-node, ZeRO++ {zpp} GB ({zpp / z3:.3f}x)")
PY
"$bin" estimate --total_params lots --largest_layer_params 5M 2>&1)
grep -q -- "--total_params: expected a positive count" <<<"$msg" || fail "bad count error unclear: $msg"
echo "estimate: ok"
