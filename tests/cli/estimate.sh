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
msg=$("$bin" estimate --total_params lots --largest_layer_params 5M 2>&1)
grep -q -- "--total_params: expected a positive count" <<<"$msg" || fail "bad count error unclear: $msg"
# LoRA r=16 on all linear layers of a Llama-2-7B-shaped model (d 4096, 32 heads = 32 KV heads, I 11008,
# 32 layers, vocab 32000, untied), 8 GPUs, bf16. By hand, r (in + out) per matrix:
#   q, k, v, o: 16 (4096 + 4096) = 131072 each; gate, up, down: 16 (4096 + 11008) = 241664 each
#   per layer 4 x 131072 + 3 x 241664 = 1249280; x 32 = 39976960 trainable (PEFT prints the same for
#   Llama-2-7b with all-linear, r 16)
#   base: embed + lm_head 2 x 32000 x 4096 = 262144000; per layer 4 x 4096^2 + 3 x 4096 x 11008 +
#   2 x 4096 (norms) = 202383360, x 32 = 6476267520; final norm 4096: 6738415616 frozen; 0.5898% trainable
# Model states (A/B by DeepSpeed's formulas, T = 39976960, base F in bf16, N = 8):
#   stage 0: 16 T + 2 F;  stage 3: 4 x 1249280 + 18 T / 8 + 2 F / 8 + 2 x 202383360 (a layer gathered)
# QLoRA: the 7 x 32 decoder matrices in NF4, ceil(n/2) + ceil(n/64) + 4 ceil(ceil(n/64)/256) + 4 bytes each
# (4096 x 4096: 8654852; 4096 x 11008: 23259908), the rest (2 x 32000 x 4096 + 65 x 4096 = 262410240) in bf16.
llama7b="--config jobs/recipes/default.yaml --gpus_per_node 8 --bf16 true --hidden_size 4096 --num_hidden_layers 32
  --intermediate_size 11008 --num_attention_heads 32 --num_key_value_heads 32 --vocab_size 32000
  --tie_word_embeddings false --max_position_embeddings 4096 --use_peft true --lora_target_modules all-linear"
# shellcheck disable=SC2086
lora=$("$bin" estimate $llama7b) || fail "LoRA estimate failed"
# shellcheck disable=SC2086
qlora=$("$bin" estimate $llama7b --load_in_4bit true) || fail "QLoRA estimate failed"
echo "$lora" | sed -n '/^LoRA/,$p'
echo "$qlora" | sed -n '/^QLoRA/,$p'
grep -qF "trainable params: 39,976,960 || all params: 6,778,392,576 || trainable%: 0.5898" <<<"$lora" \
  || fail "LoRA trainable line"
grep -qF "frozen base params: 6,738,415,616" <<<"$lora" || fail "LoRA frozen line"
python3 - "$lora" "$qlora" <<'PY' || fail "LoRA model-state / traffic rows"
import math, re, sys
GB = 2**30
T, F, layer_T, layer_F = 39976960, 6738415616, 1249280, 202383360
def nf4(n):
    blocks = math.ceil(n / 64)
    return math.ceil(n / 2) + blocks + 4 * math.ceil(blocks / 256) + 4
nf4_base = 32 * (4 * nf4(4096 * 4096) + 3 * nf4(4096 * 11008))
assert (nf4(4096 * 4096), nf4(4096 * 11008)) == (8654852, 23259908)
def states(text):
    return {int(m.group(1)): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^  stage (\d): +([\d.]+)GB = .*full fine-tuning +([\d.]+)GB", text, re.M)}
def near(got, want_bytes, what):
    assert abs(got - want_bytes / GB) <= 0.006, f"{what}: {got} GB, by hand {want_bytes / GB:.4f} GB"
lora, qlora = states(sys.argv[1]), states(sys.argv[2])
assert sorted(lora) == [0, 1, 2, 3] and sorted(qlora) == [0, 1, 2, 3], (lora, qlora)
near(lora[0][0], 16 * T + 2 * F, "LoRA stage 0")
near(lora[3][0], 4 * layer_T + 18 * T / 8 + 2 * F / 8 + 2 * layer_F, "LoRA stage 3")
near(lora[0][1], 16 * F, "full stage 0")
near(lora[3][1], 4 * layer_F + 18 * F / 8, "full stage 3 (DeepSpeed's formula)")
base_q = 2 * 262410240 + nf4_base
near(qlora[0][0], 16 * T + base_q, "QLoRA stage 0")
near(qlora[3][0], 4 * layer_T + 18 * T / 8 + base_q / 8 + 2 * layer_F, "QLoRA stage 3")
traffic = {m.group(1).strip(): float(m.group(2)) for m in
           re.finditer(r"^  (stage .*?LoRA.*?\)) +intra-node +([\d.]+)GB", sys.argv[1], re.M)}
near(traffic["stage 0 LoRA (all-reduce A/B gradients)"], 2 * T * 7 / 8 * 2, "LoRA stage 0 traffic")
near(traffic["stage 3 LoRA (base gathered 2x + A/B as stage 3)"], (2 * 2 * F + 3 * 2 * T) * 7 / 8, "LoRA stage 3 traffic")
print(f"LoRA stage 3: {lora[3][0]} GB per GPU vs full fine-tuning {lora[3][1]} GB; QLoRA {qlora[3][0]} GB")
PY
# An adapter folder turns LoRA on as in train: tiny_llama (d 32, 4 heads of 8, 1 KV head, I 80, 2 layers,
# vocab 1664, untied) with PEFT's r=8 all-linear adapter. Per layer 8 (32+32) x 2 (q, o) + 8 (32+8) x 2
# (k, v) + 8 (32+80) x 3 = 1024 + 640 + 2688 = 4352; x 2 = 8704. Base 2 x 1664 x 32 + 2 x (2 x 32 x 32 +
# 2 x 8 x 32 + 3 x 80 x 32 + 2 x 32) + 32 = 127136; 8704 / 135840 = 6.40754%.
out=$("$bin" estimate --model_name_or_path tests/reference/hf/tiny_llama \
  --adapter tests/reference/peft/llama_peft_init/adapter_init) || fail "estimate with --adapter failed"
grep -qF "trainable params: 8,704 || all params: 135,840 || trainable%: 6.4075" <<<"$out" \
  || fail "adapter's trainable line: $(grep trainable <<<"$out")"
msg=$("$bin" estimate --total_params 7B --largest_layer_params 525M --use_peft true 2>&1)
[ $? -eq 2 ] || fail "LoRA with --total_params: expected exit 2"
grep -q "use_peft: the LoRA estimate" <<<"$msg" || fail "LoRA with --total_params error unclear: $msg"
echo "estimate: ok"
