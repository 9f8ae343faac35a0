#!/usr/bin/env bash
# A LoRA checkpoint holds the adapter, not the base: plain `consolidate` refuses it naming
# --merge_adapters, and `consolidate --merge_adapters` writes the base with W + scale·B·A merged, which
# transformers loads without PEFT with the loss PEFT gives over the same adapter (and not the loss of
# an earlier checkpoint's adapter: the merge really took this one). Bad folders are named, exit 2.
# generate reads a LoRA checkpoint (or --adapter over a base) as its base with the adapter merged.
# Usage: lora_merge_adapters.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
py="$src/.cache/hfvenv/bin/python"
[ -x "$py" ] || fail "$py is missing: run jobs/install-test-deps.sh (jobs/run-tests.sh does)"
base=tests/reference/hf/tiny_llama

head -n 48 jobs/data/sft_train.jsonl > "$tmp/train.jsonl"
timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train \
  --model_name_or_path "$base" --chat_template llama3 --dataset_path "$tmp/train.jsonl" --max_seq_length 128 \
  --per_device_train_batch_size 4 --max_steps 4 --save_steps 2 --learning_rate 3e-3 --lr_scheduler_type constant \
  --zero_stage 3 --do_eval false --output_dir "$tmp/run" --use_peft true --lora_dropout 0 \
  --lora_target_modules all-linear > "$tmp/train.log" 2>&1 || { tail -20 "$tmp/train.log"; fail "LoRA training"; }

"$bin" consolidate "$tmp/run/checkpoint-4" --output "$tmp/plain" > "$tmp/plain.log" 2>&1
[ $? -eq 2 ] || fail "plain consolidate of a LoRA checkpoint should exit 2"
grep -q -- "is a LoRA checkpoint.*--merge_adapters" "$tmp/plain.log" || { cat "$tmp/plain.log"; fail "plain consolidate's message"; }

"$bin" consolidate "$tmp/run/checkpoint-4" --merge_adapters --output "$tmp/merged" > "$tmp/merge.log" 2>&1 \
  || { cat "$tmp/merge.log"; fail "consolidate --merge_adapters"; }
for f in model.safetensors config.json tokenizer.json; do [ -f "$tmp/merged/$f" ] || fail "merged output lacks $f"; done

# loss: PeftModel over the base with this adapter; full_loss: transformers on the merged folder alone
check() {
  "$py" tests/reference/check_peft_adapter.py "$base" "$1" tests/reference/hf/batch.json tiny_llama "$tmp/merged" \
    2> "$tmp/check.err" | tail -n 1 > "$tmp/check.json" || { cat "$tmp/check.err"; fail "check_peft_adapter.py on $1"; }
}
field() { "$py" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$tmp/check.json" "$1"; }
rel() { "$py" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(abs(a - b) / abs(b))" "$1" "$2"; }
check "$tmp/run/checkpoint-4"
loss=$(field loss); full=$(field full_loss)
[ "$("$py" -c "print($(rel "$full" "$loss") < 1e-5)")" = True ] || fail "merged model's loss $full != PEFT's $loss"
check "$tmp/run/checkpoint-2"
early=$(field loss)
[ "$("$py" -c "print($(rel "$full" "$early") > 1e-4)")" = True ] \
  || fail "merged loss $full equals checkpoint-2's adapter loss $early: the merge did not take checkpoint-4's adapter"

# --merge_adapters on a folder with no adapter, and a base that is not there: exit 2, named
"$bin" consolidate "$tmp/merged" --merge_adapters --output "$tmp/x" > "$tmp/bad.log" 2>&1
[ $? -eq 2 ] && grep -q "adapter_config.json" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "no-adapter folder"; }
"$bin" consolidate "$tmp/run/checkpoint-4" --merge_adapters --base "$tmp/nothing" --output "$tmp/y" > "$tmp/bad.log" 2>&1
[ $? -eq 2 ] && grep -q -- "--base '$tmp/nothing'" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "missing base"; }
# generate: a LoRA checkpoint (its base + its adapter), the base with --adapter, and the run's merged
# output_dir give the same greedy text; the base alone does not.
gen() {
  "$bin" generate --model "$@" --chat_template llama3 --max_seq_length 128 --prompt "upper: hello" \
    --max_new_tokens 12 2> "$tmp/gen.err" || { cat "$tmp/gen.err"; fail "generate --model $*"; }
}
from_checkpoint=$(gen "$tmp/run/checkpoint-4") || exit 1
from_adapter=$(gen "$base" --adapter "$tmp/run/checkpoint-4") || exit 1
from_merged=$(gen "$tmp/run") || exit 1
from_base=$(gen "$base") || exit 1
[ "$from_checkpoint" = "$from_merged" ] || fail "generation from the LoRA checkpoint differs from the merged output_dir"
[ "$from_adapter" = "$from_merged" ] || fail "generation from the base with --adapter differs from the merged output_dir"
[ "$from_base" != "$from_merged" ] || fail "the base alone generates what the adapter does: the adapter was not applied"

echo "ok: merged adapter loss $full = PEFT's $loss (checkpoint-2's adapter: $early)"
