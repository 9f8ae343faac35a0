#!/usr/bin/env bash
# A short `shardft train` then `shardft eval` on the bundled data: trl-style logs, metrics.jsonl with
# per-step lines and the summary, a loss that falls, the model file, and eval reading it back.
# Usage: train_eval_run.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }

"$bin" train --config jobs/recipes/default.yaml --max_steps 40 --logging_steps 10 --eval_samples 16 \
  --output_dir "$tmp/run" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "train exited non-zero"; }
cat "$tmp/train.log"
grep -qE "^\{'loss': [0-9.e+-]+, 'grad_norm': [0-9.e+-]+, 'learning_rate': [0-9.e+-]+, 'epoch': [0-9.e+-]+" "$tmp/train.log" \
  || fail "no trl-style log line"
grep -q "'train_runtime'" "$tmp/train.log" || fail "no final summary line"
[ -s "$tmp/run/model.safetensors" ] || fail "no model.safetensors"

python3 - "$tmp/run/metrics.jsonl" <<'PY' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps, summary = lines[:-1], lines[-1]
assert len(steps) == 4, f"expected 4 logging lines, got {len(steps)}"
for s in steps:
    for k in ("step", "loss", "grad_norm", "learning_rate", "epoch", "tokens_per_second"):
        assert k in s, f"metrics line lacks {k}: {s}"
assert [s["step"] for s in steps] == [10, 20, 30, 40]
assert steps[-1]["loss"] < 0.8 * steps[0]["loss"], f"loss did not fall: {steps[0]['loss']} -> {steps[-1]['loss']}"
for k in ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "eval_loss", "eval_exact_match"):
    assert k in summary, f"summary lacks {k}: {summary}"
assert 0.0 <= summary["eval_exact_match"] <= 1.0
print("metrics.jsonl ok:", summary)
PY

"$bin" eval --config jobs/recipes/default.yaml --eval_samples 16 --output_dir "$tmp/run" > "$tmp/eval.log" 2>&1 \
  || { cat "$tmp/eval.log"; fail "eval exited non-zero"; }
cat "$tmp/eval.log"
want=$(python3 -c "import json,sys; print(round(json.loads(open(sys.argv[1]).readlines()[-1])['eval_loss'], 4))" "$tmp/run/metrics.jsonl")
got=$(python3 -c "import ast,sys; d=[ast.literal_eval(l) for l in open(sys.argv[1]) if l.startswith('{')][0]; print(round(d['eval_loss'], 4))" "$tmp/eval.log")
[ "$want" = "$got" ] || fail "eval of the saved model gives eval_loss $got, training reported $want"

"$bin" eval --config jobs/recipes/default.yaml --output_dir "$tmp/nothing" > "$tmp/eval2.log" 2>&1 && fail "eval without a model succeeded"
grep -q "model.safetensors" "$tmp/eval2.log" || fail "eval without a model does not name the file"
for strategy in ffd bfd; do
  "$bin" train --config jobs/recipes/default.yaml --packing --packing_strategy $strategy --max_seq_length 128 \
    --per_device_train_batch_size 2 --max_steps 20 --logging_steps 10 --do_eval false --output_dir "$tmp/packed-$strategy" \
    > "$tmp/packed.log" 2>&1 || { cat "$tmp/packed.log"; fail "packed training ($strategy) failed"; }
  fit=first; [ $strategy = bfd ] && fit=best
  grep -qE "packing: 4000 samples into [0-9]+ rows of 128 tokens \(9[0-9]\.[0-9]+% real tokens, $fit-fit decreasing\)" \
    "$tmp/packed.log" || { cat "$tmp/packed.log"; fail "packing ($strategy) did not pack the bundled data above 90%"; }
done
echo "train_eval_run: ok"
