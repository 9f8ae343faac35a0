#!/usr/bin/env bash
# QLoRA end to end (2 ranks, ZeRO-3, all-linear on tiny_llama): a load_in_4bit run trains exactly as LoRA
# on the base that NF4 round-tripped (written by a QLoRA run whose adapter stays ~0: its merged
# output_dir is dequantize(quantize(W))): the same train_loss and eval_loss, to the last digit, after
# 60 steps; LoRA on the unquantized base ends elsewhere (the quantization was applied). A recipe with
# load_in_4bit but no LoRA exits 2 naming both keys.
# Usage: qlora_train.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
base=tests/reference/hf/tiny_llama
head -n 240 jobs/data/sft_train.jsonl > "$tmp/train.jsonl"
head -n 16 jobs/data/sft_eval.jsonl > "$tmp/eval.jsonl"

train() {  # NAME BASE EXTRA...
  local name=$1 model=$2; shift 2
  timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train \
    --model_name_or_path "$model" --chat_template llama3 --dataset_path "$tmp/train.jsonl" \
    --eval_dataset_path "$tmp/eval.jsonl" --max_seq_length 128 --per_device_train_batch_size 4 --max_steps 60 \
    --learning_rate 5e-3 --lr_scheduler_type constant --zero_stage 3 --do_eval true --eval_max_new_tokens 8 \
    --output_dir "$tmp/$name" --use_peft true --lora_dropout 0 --lora_target_modules all-linear "$@" \
    > "$tmp/$name.log" 2>&1 || { tail -20 "$tmp/$name.log"; fail "training $name"; }
}
losses() { tail -n 1 "$tmp/$1/metrics.jsonl" | grep -o '"\(train\|eval\)_loss":[^,}]*' | tr '\n' ' '; }

train qlora "$base" --load_in_4bit true
train lora "$base"
# In fp32: the dequantized NF4 values are exact there (the base's own bf16 would round them).
"$bin" train --model_name_or_path "$base" --chat_template llama3 --dataset_path "$tmp/train.jsonl" --max_seq_length 128 \
  --per_device_train_batch_size 4 --max_steps 1 --learning_rate 1e-30 --do_eval false --output_dir "$tmp/roundtrip" \
  --export_dtype fp32 \
  --use_peft true --lora_dropout 0 --lora_target_modules all-linear --load_in_4bit true > "$tmp/roundtrip.log" 2>&1 \
  || { tail -20 "$tmp/roundtrip.log"; fail "writing the round-tripped base"; }
train lora_on_roundtrip "$tmp/roundtrip"

q=$(losses qlora); l=$(losses lora); r=$(losses lora_on_roundtrip)
[ -n "$q" ] || fail "no losses in the QLoRA run's metrics.jsonl"
[ "$q" = "$r" ] || fail "QLoRA ($q) differs from LoRA on the NF4 round-tripped base ($r)"
[ "$q" != "$l" ] || fail "QLoRA equals LoRA on the unquantized base ($l): nothing was quantized"

"$bin" train --model_name_or_path "$base" --load_in_4bit true --output_dir "$tmp/x" > "$tmp/bad.log" 2>&1
[ $? -eq 2 ] && grep -q "load_in_4bit.*use_peft" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "load_in_4bit without LoRA"; }
echo "ok: QLoRA $q = LoRA on the round-tripped base; LoRA on the original base $l"
