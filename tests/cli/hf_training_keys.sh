#!/usr/bin/env bash
# HF TrainingArguments names a trl user brings: logging_first_step logs step 1; optim's AdamW names run the
# same AdamW bit for bit; data_seed orders the data alone (the weights' initialisation stays seed's);
# lr_scheduler_type warmup_stable_decay with lr_scheduler_kwargs logs HF's rates; assistant_only_loss false
# trains on every token.
# Usage: hf_training_keys.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
run() {  # NAME FLAGS...
  local name=$1; shift
  "$bin" train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 3 --do_eval false \
    --output_dir "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log"; fail "$name exited non-zero"; }
}
run base
run first --logging_first_step true --optim adamw_torch_fused
run seeded --data_seed 42
run reordered --data_seed 7
run whole --assistant_only_loss false
run wsd --lr_scheduler_type warmup_stable_decay --warmup_steps 2 --learning_rate 1e-3 \
  --lr_scheduler_kwargs '{num_decay_steps: 2, decay_type: linear, min_lr_ratio: 0.5}'
python3 - "$tmp" <<'PY' || exit 1
import json, sys
tmp = sys.argv[1]
def records(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}/metrics.jsonl")][:-1]
base, first = records("base"), records("first")
assert [r["step"] for r in base] == [3, 6], base
assert [r["step"] for r in first] == [1, 3, 6], first
# (the step-3 window now starts at step 2, so its mean loss differs; step 6's window is the same)
assert [(r["grad_norm"], r["learning_rate"]) for r in first[1:]] == [(r["grad_norm"], r["learning_rate"]) for r in base]
assert first[-1]["loss"] == base[-1]["loss"], "adamw_torch_fused changed the training"
assert [r["loss"] for r in records("seeded")] == [r["loss"] for r in base], "data_seed = seed changed the data order"
assert [r["loss"] for r in records("reordered")] != [r["loss"] for r in base], "data_seed did not reorder the data"
# Every token a target: more of them per step, most of them template text the model learns at once.
whole = records("whole")
assert whole[-1]["loss"] < base[-1]["loss"], (whole, base)
# warm-up 2 steps, stable 2 (6 - 2 - 2), linear decay over 2 toward 0.5: step 3 (index 2) runs at 1e-3,
# step 6 (index 5, halfway through the decay) at (0.5 * 0.5 + 0.5) * 1e-3
wsd = {r["step"]: r["learning_rate"] for r in records("wsd")}
assert abs(wsd[3] - 1e-3) < 1e-15 and abs(wsd[6] - 0.75e-3) < 1e-15, wsd
print("ok: logging_first_step, optim names, data_seed, warmup_stable_decay")
PY
echo "PASS"
