#!/usr/bin/env bash
# Bad input to `shardft train`: one clear error naming the key or file:line, a non-zero exit.
# Usage: bad_input.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fails=0

# expect_error NAME EXPECTED_TEXT ARGS...: the run must exit non-zero and print EXPECTED_TEXT.
expect_error() {
  local name=$1 want=$2; shift 2
  local out code
  out=$("$bin" train "$@" --output_dir "$tmp/out-$name" 2>&1); code=$?  # a run of its own each
  if [ $code -eq 0 ]; then
    echo "FAIL $name: exit code 0"; fails=$((fails+1))
  elif ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL $name: output lacks '$want':"; echo "$out" | head -5; fails=$((fails+1))
  else
    echo "ok   $name (exit $code): $(grep -F -- "$want" <<<"$out" | head -1)"
  fi
}

printf 'learning_rate: 0.001\nlearning_rat: 0.002\n' > "$tmp/unknown.yaml"
expect_error unknown-key "unknown.yaml:2: unknown key 'learning_rat'" --config "$tmp/unknown.yaml"

printf 'seed: 3\nlearning_rate: fast\n' > "$tmp/type.yaml"
expect_error wrong-type "type.yaml:2: key 'learning_rate' expects a number, got 'fast'" --config "$tmp/type.yaml"

printf 'adam_beta1: 1.5\n' > "$tmp/range.yaml"
expect_error out-of-range "range.yaml:1: key 'adam_beta1' must be in [0, 1), got 1.5" --config "$tmp/range.yaml"

expect_error override-unknown "--per_device_batch_size: unknown key" --per_device_batch_size 4
expect_error override-range "--gradient_accumulation_steps" --gradient_accumulation_steps 0
expect_error missing-recipe "cannot open recipe '$tmp/nope.yaml'" --config "$tmp/nope.yaml"
expect_error missing-dataset "cannot open dataset '$tmp/missing.jsonl'" --dataset_path "$tmp/missing.jsonl"

{
  echo '{"conversations":[{"from":"human","value":"upper: ab"},{"from":"gpt","value":"AB"}]}'
  echo ''
  echo '{"conversations":[{"from":"human","value":"upper: cd"},{"from":"gpt","value":"CD"}'
} > "$tmp/bad.jsonl"
expect_error malformed-jsonl "$tmp/bad.jsonl:3: not valid JSON" --dataset_path "$tmp/bad.jsonl"

echo '{"conversations":[{"from":"robot","value":"hi"},{"from":"gpt","value":"x"}]}' > "$tmp/role.jsonl"
expect_error unknown-role "$tmp/role.jsonl:1:" --dataset_path "$tmp/role.jsonl"

expect_error global-batch "train_batch_size 100 != per_device_train_batch_size 8 x gradient_accumulation_steps 1 x 1 ranks = 8" --train_batch_size 100
echo '{"zero_optimization": {"stage": 2, "cpu_offload": true}}' > "$tmp/ds.json"
expect_error deepspeed-unsupported "$tmp/ds.json: DeepSpeed key 'zero_optimization.cpu_offload' is not supported" --deepspeed "$tmp/ds.json"
expect_error zero-stage-range "key 'zero_stage' must be in [0, 3], got 4" --zero_stage 4
expect_error shard-group "shard_group_size 3 does not divide the 1 ranks" --shard_group_size 3
expect_error layout-every-factor "world size 1 = 1 node x 1 ranks per node (from MPI); shard group 3 (shard_group_size), replicas 1/3 (not whole); hpZ partition 2" --shard_group_size 3 --zero_stage 3 --zero_hpz_partition_size 2
expect_error layout-hpz "zero_hpz_partition_size 2 does not divide the shard group of 3 ranks; would fit: 1, 3" --shard_group_size 3 --zero_stage 3 --zero_hpz_partition_size 2
expect_error collectives-nccl "collectives: nccl" --collectives nccl
expect_error collectives-unknown "key 'collectives' must be one of" --collectives gloo
expect_error collective-timeout "collective_timeout_s" --collective_timeout_s 0
expect_error memory-size "key 'max_memory_per_rank' expects auto, none or a size" --max_memory_per_rank lots
expect_error shard-size "key 'max_shard_size' expects a size" --max_shard_size 5XB
expect_error export-dtype "export_dtype" --export_dtype float8
cp -r tests/reference/hf/tiny_llama "$tmp/fp8-model"
sed -i 's/"torch_dtype": "bfloat16"/"torch_dtype": "float8_e4m3fn"/' "$tmp/fp8-model/config.json"
expect_error source-dtype "torch_dtype 'float8_e4m3fn' is none of float32, bfloat16, float16; set export_dtype" \
  --model_name_or_path "$tmp/fp8-model"
# Qwen2-1.5B's shape in a 1 GB budget: refused before the 23 GiB of model state is allocated.
expect_error memory-preflight "max_memory_per_rank: rank 0 needs about" --vocab_size 151936 --hidden_size 1536 \
  --num_hidden_layers 28 --num_attention_heads 12 --num_key_value_heads 2 --intermediate_size 8960 --max_memory_per_rank 1GB
expect_error nonfinite-step "the first parameter holding NaN/Inf after the update is model." \
  --learning_rate 1e30 --max_steps 4 --do_eval false

expect_error too-few-samples "fewer than one optimizer step needs" --per_device_train_batch_size 5000
out=$("$bin" frobnicate 2>&1); code=$?
if [ $code -eq 0 ] || ! grep -q "unknown command 'frobnicate'" <<<"$out"; then echo "FAIL unknown-command"; fails=$((fails+1)); else echo "ok   unknown-command"; fi

[ -e "$tmp/out/model.safetensors" ] && { echo "FAIL: a failed run wrote a model"; fails=$((fails+1)); }
echo "bad_input: $fails failed"
[ $fails -eq 0 ]
