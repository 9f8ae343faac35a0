#!/usr/bin/env bash
# LoRA and QLoRA learn the default task on a pretrained base, to the same held-out exact match.
# The default recipe trains a random model, whose frozen embeddings cap the logits, so adapters alone
# cannot learn it. So a base is pretrained first (the default recipe, 2 ranks) on other tasks over the
# same strings: copy, reverse, sort and lower (upper-case in, lower-case out), never "upper:", with the
# same held-out strings. The base scores exact match ~0 on the default task; then LoRA (all-linear, r 16)
# and QLoRA (the same on the NF4-quantized base), ZeRO-3 at 2 ranks, fine-tune it on the default data.
# Acceptance (issue 18): QLoRA's held-out exact match is within 0.05 of LoRA's, and LoRA's is >= 0.9 so
# that the comparison means something. Measured: base 0.0 (eval loss 11.2), LoRA 1.0, QLoRA 1.0.
# The base must have learned its own tasks (held-out exact match >= 0.8), or nothing is compared.
# Usage: qlora_default_task.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 SHARDFT_BIN=$bin
fail() { echo "FAIL: $*"; exit 1; }
exact_match() { tail -n 1 "$1" | grep -o '"eval_exact_match":[^,}]*' | cut -d: -f2; }

python3 jobs/data/make_synthetic_sft.py --mix copy,reverse,sort,lower --out-dir "$tmp/pretrain_data" > /dev/null \
  || fail "generating the pretraining data"
python3 - "$tmp/pretrain_data" jobs/data <<'PY' || fail "the pretraining data does not hold the default task's eval strings out"
import json, sys
def strings(path):  # the random lowercase string behind each prompt ("task: string")
    for line in open(path):
        task, s = json.loads(line)["conversations"][0]["value"].split(": ", 1)
        yield task, s.lower()
pre, default = sys.argv[1], sys.argv[2]
pre_train = list(strings(f"{pre}/sft_train.jsonl"))
assert all(task != "upper" for task, _ in pre_train), "the pretraining data holds the default task"
held_out = {s for _, s in strings(f"{default}/sft_eval.jsonl")}
assert held_out == {s for _, s in strings(f"{pre}/sft_eval.jsonl")}, "another held-out set"
assert not held_out & {s for _, s in pre_train}, "pretraining saw held-out strings"
PY
# 16 epochs, twice the default's: with 8 the base learned its four tasks to 0.54-0.95 exact match
# depending on the seed, and on the weak bases LoRA's 3 epochs reached 0.7-0.9 on the default task (a
# rounding change anywhere could move the test across its bars); 16 epochs gave bases of 0.90-0.97 and
# LoRA and QLoRA 1.0 at every seed tried (1-5, 42).
timeout 300 bash jobs/mpirun.sh -np 2 -- train --config jobs/recipes/default.yaml --output_dir "$tmp/base" \
  --num_train_epochs 16 --dataset_path "$tmp/pretrain_data/sft_train.jsonl" \
  --eval_dataset_path "$tmp/pretrain_data/sft_eval.jsonl" > "$tmp/base.log" 2>&1 \
  || { tail -20 "$tmp/base.log"; fail "pretraining the base"; }
pre_em=$(exact_match "$tmp/base/metrics.jsonl")
python3 -c "import sys; sys.exit(float(sys.argv[1]) < 0.8)" "${pre_em:-0}" \
  || fail "the base learned its own tasks to only ${pre_em:-nothing} held-out exact match (bar 0.8): no pretrained base"
"$bin" eval --config jobs/recipes/default.yaml --output_dir "$tmp/base" > "$tmp/base_eval.log" 2>&1 \
  || { tail -20 "$tmp/base_eval.log"; fail "evaluating the base on the default task"; }
base_em=$(grep -o "'eval_exact_match': [0-9.e+-]*" "$tmp/base_eval.log" | cut -d' ' -f2)
[ -n "$base_em" ] || { cat "$tmp/base_eval.log"; fail "no exact match in the base's eval"; }

# The default recipe without its model keys: the model comes from the base's config.json.
sed -e '/^# model/,/^max_position_embeddings/d' jobs/recipes/default.yaml > "$tmp/adapters.yaml"
finetune() {  # NAME EXTRA...
  local name=$1; shift
  timeout 300 bash jobs/mpirun.sh -np 2 -- train --config "$tmp/adapters.yaml" --model_name_or_path "$tmp/base" \
    --tokenizer_name_or_path byte --output_dir "$tmp/$name" --zero_stage 3 --num_train_epochs 3 \
    --learning_rate 5e-3 --use_peft true --lora_target_modules all-linear --lora_dropout 0 "$@" \
    > "$tmp/$name.log" 2>&1 || { tail -20 "$tmp/$name.log"; fail "fine-tuning $name"; }
}
finetune lora
finetune qlora --load_in_4bit true
frozen() { grep -o "of which frozen [0-9]* B" "$tmp/$1.log" | grep -o "[0-9]*"; }
[ "$(frozen qlora)" -lt "$(frozen lora)" ] 2>/dev/null \
  || fail "QLoRA's frozen base ($(frozen qlora) B per rank) is not smaller than LoRA's ($(frozen lora) B): not quantized"
lora_em=$(exact_match "$tmp/lora/metrics.jsonl"); qlora_em=$(exact_match "$tmp/qlora/metrics.jsonl")
[ -n "$lora_em" ] && [ -n "$qlora_em" ] || fail "no eval_exact_match in the fine-tuning runs' metrics.jsonl"
echo "held-out exact match: base $pre_em on its own tasks, $base_em on the default task; LoRA $lora_em, QLoRA $qlora_em"
python3 - "$base_em" "$lora_em" "$qlora_em" <<'PY' || exit 1
import sys
base, lora, qlora = map(float, sys.argv[1:])
assert base <= 0.05, f"the base already knows the default task (exact match {base}); the check would mean nothing"
assert lora >= 0.9, f"LoRA reached only {lora} on a base pretrained for it"
assert abs(qlora - lora) <= 0.05, f"QLoRA {qlora} is not within 0.05 of LoRA {lora}"
PY
