#!/usr/bin/env bash
# LoRA resume: a 2-rank ZeRO-3 LoRA run (all linear layers of tests/reference/hf/tiny_llama, frozen base)
# saves every 4 steps; a second run resumes from checkpoint-4 of the first. Every resumed step's loss and
# grad_norm must equal the uninterrupted run's bit for bit, and the final adapter_model.safetensors (and
# the end-of-run merged model.safetensors) must be byte-identical: resume restores the adapters and their
# AdamW moments exactly and reloads the frozen base from model_name_or_path.
# Usage: lora_resume.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 SHARDFT_BIN=$bin
fail() { echo "FAIL: $*"; exit 1; }

head -n 64 jobs/data/sft_train.jsonl > "$tmp/train.jsonl"
lora=(train --model_name_or_path tests/reference/hf/tiny_llama --chat_template llama3 --dataset_path "$tmp/train.jsonl"
      --max_seq_length 128 --per_device_train_batch_size 4 --max_steps 10 --learning_rate 1e-2
      --lr_scheduler_type cosine --warmup_steps 2 --logging_steps 1 --zero_stage 3 --do_eval false
      --use_peft true --lora_r 4 --lora_alpha 8 --lora_target_modules all-linear --lora_dropout 0)
timeout 300 bash jobs/mpirun.sh -np 2 -- "${lora[@]}" --save_steps 4 --output_dir "$tmp/full" > "$tmp/full.log" 2>&1 \
  || { cat "$tmp/full.log"; fail "the LoRA reference run exited non-zero"; }
[ -f "$tmp/full/checkpoint-4/adapter_model.safetensors" ] || { ls "$tmp/full"/*; fail "checkpoint-4 holds no adapter"; }
timeout 300 bash jobs/mpirun.sh -np 2 -- "${lora[@]}" --output_dir "$tmp/resumed" \
  --resume_from_checkpoint "$tmp/full/checkpoint-4" > "$tmp/resumed.log" 2>&1 \
  || { cat "$tmp/resumed.log"; fail "the LoRA resume exited non-zero"; }
python3 - "$tmp/full/metrics.jsonl" "$tmp/resumed/metrics.jsonl" <<'PY' || exit 1
import json, sys
def steps(path):
    return {l["step"]: (l["loss"], l["grad_norm"], l["learning_rate"]) for l in map(json.loads, open(path)) if "step" in l}
full, resumed = steps(sys.argv[1]), steps(sys.argv[2])
assert sorted(full) == list(range(1, 11)), sorted(full)
assert sorted(resumed) == list(range(5, 11)), f"the resumed run logged steps {sorted(resumed)}, expected 5..10"
assert full[10][0] < full[1][0], f"the LoRA run did not train: loss {full[1][0]} -> {full[10][0]}"
diff = [k for k in resumed if resumed[k] != full[k]]
assert not diff, "resume is not bit-identical (loss, grad_norm, lr): " + \
    "; ".join(f"step {k}: {full[k]} vs {resumed[k]}" for k in diff)
print(f"  steps 5..10 bit-identical after resuming from checkpoint-4 (loss {full[1][0]:.6f} -> {full[10][0]:.6f})")
PY
for f in adapter_model.safetensors model.safetensors; do
  [ -f "$tmp/full/$f" ] && [ -f "$tmp/resumed/$f" ] || fail "an end-of-run $f is missing"
  cmp -s "$tmp/full/$f" "$tmp/resumed/$f" || fail "the resumed run's final $f differs from the uninterrupted run's"
done
cmp -s "$tmp/full/checkpoint-4/adapter_model.safetensors" "$tmp/full/adapter_model.safetensors" \
  && fail "the adapter did not change after step 4: the comparison above would prove nothing"
echo "ok"
