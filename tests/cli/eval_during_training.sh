#!/usr/bin/env bash
# Evaluation during training, as HF's Trainer does it:
# 1. 2 ranks at ZeRO-3 (the eval set split between them) with eval_strategy steps, load_best_model_at_end,
#    save_total_limit 1 and early_stopping_patience: the eval curve is in metrics.jsonl and TensorBoard, the
#    run stops where HF's EarlyStoppingCallback would (exit 0, saying why), the best checkpoint survives
#    rotation, and the exported model is the best one (`shardft eval` of it gives the best eval_loss).
# 2. val_set_size holds out training samples as the eval set; eval_on_start; save_strategy best saves at
#    exactly the evaluations that set a new best; the end-of-run evaluation is the loss on the split.
# Usage: eval_during_training.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
py="$src/.cache/hfvenv/bin/python"
[ -x "$py" ] || fail "$py is missing: run jobs/install-test-deps.sh (jobs/run-tests.sh does)"
mpi() { timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" "$@"; }
# A constant, high learning rate: the eval loss turns up within a few dozen steps on the bundled task.
common=(--config jobs/recipes/default.yaml --learning_rate 1e-2 --lr_scheduler_type constant --logging_steps 10
        --per_device_eval_batch_size 8 --eval_samples 50)

mpi train "${common[@]}" --zero_stage 3 --per_device_train_batch_size 4 --max_steps 120 \
  --eval_strategy steps --eval_steps 5 --save_steps 5 --save_total_limit 1 --load_best_model_at_end true \
  --early_stopping_patience 3 --report_to tensorboard --run_name curve --output_dir "$tmp/best" \
  > "$tmp/best.log" 2>&1 || { cat "$tmp/best.log"; fail "training with early stopping exited non-zero"; }
grep -q "^early stopping: eval_loss did not fall below the best by more than early_stopping_threshold 0 in 3 evaluations in a row" \
  "$tmp/best.log" || { cat "$tmp/best.log"; fail "no line saying why the run stopped"; }
grep -q "load_best_model_at_end: the model is checkpoint-" "$tmp/best.log" || { cat "$tmp/best.log"; fail "the best model was not loaded"; }

"$bin" eval --config jobs/recipes/default.yaml --eval_samples 50 --output_dir "$tmp/best" > "$tmp/eval.log" 2>&1 \
  || { cat "$tmp/eval.log"; fail "eval of the exported model exited non-zero"; }

"$py" - "$tmp/best" "$tmp/eval.log" <<'PY' || { cat "$tmp/best.log"; exit 1; }
import ast, json, os, struct, sys
from tensorboard.backend.event_processing import event_accumulator
out, eval_log = sys.argv[1:3]
records = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
closing = records[-1]
evals = [r for r in records[:-1] if "eval_loss" in r]
assert [r["step"] for r in evals] == list(range(5, 5 * len(evals) + 1, 5)), [r["step"] for r in evals]
# HF's rules: a strict improvement is the new best; patience counts evaluations not better than the best
# before them (threshold 0); the run stops at the third in a row.
best = None; bad = 0; stop = None
for r in evals:
    v = r["eval_loss"]
    bad = 0 if best is None or v < best[0] else bad + 1
    if best is None or v < best[0]:
        best = (v, r["step"])
    if bad >= 3:
        stop = r["step"]; break
assert stop is not None and stop == evals[-1]["step"], f"expected a stop after 3 evaluations without improvement: {evals}"
assert stop < 120 and closing["global_step"] == stop and closing["stopped_early"] is True, closing
assert best[1] < stop, f"the best is the last evaluation ({best}); the run does not show that the best is kept"
assert closing["best_metric"] == best[0] and closing["best_step"] == best[1], (closing, best)
assert closing["best_model_checkpoint"] == f"checkpoint-{best[1]}", closing
kept = sorted(d for d in os.listdir(out) if d.startswith("checkpoint-"))
assert kept == sorted([f"checkpoint-{best[1]}", f"checkpoint-{stop}"]), f"save_total_limit 1 kept {kept}"
# The exported model is the best checkpoint's: evaluated alone on one rank, it gives the best eval_loss.
exported = [ast.literal_eval(l) for l in open(eval_log) if l.startswith("{'eval_loss'")][0]["eval_loss"]
assert abs(exported - best[0]) <= 1e-5 * best[0], f"the exported model's eval_loss {exported} != the best {best[0]}"
assert abs(closing["eval_loss"] - best[0]) <= 1e-5 * best[0], f"the end-of-run eval_loss {closing['eval_loss']} != {best[0]}"
# The curve in TensorBoard: eval/loss at every evaluation's step, as a float.
acc = event_accumulator.EventAccumulator(os.path.join(out, "runs", "curve"), size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
as_float = lambda v: struct.unpack("f", struct.pack("f", v))[0]
got = [(e.step, e.value) for e in acc.Scalars("eval/loss")]
want = [(r["step"], as_float(r["eval_loss"])) for r in evals] + [(stop, as_float(closing["eval_loss"]))]
assert got == want, f"TensorBoard eval/loss {got} != metrics.jsonl {want}"
print(f"early stopping ok: {len(evals)} evaluations, best {best[0]:.5f} at step {best[1]}, stopped after step {stop}")
PY

# val_set_size, eval_on_start and save_strategy best, one rank.
"$bin" train "${common[@]}" --max_steps 30 --val_set_size 40 --eval_dataset_path= --eval_on_start true --eval_strategy steps --eval_steps 5 \
  --save_strategy best --output_dir "$tmp/split" > "$tmp/split.log" 2>&1 \
  || { cat "$tmp/split.log"; fail "training with val_set_size exited non-zero"; }
grep -q "^val_set_size 40: 40 samples held out for evaluation, 3960 to train on" "$tmp/split.log" \
  || { cat "$tmp/split.log"; fail "the split is not reported"; }
grep -q "3960 samples" "$tmp/split.log" || { cat "$tmp/split.log"; fail "the run trains on more than the 3960 kept samples"; }
"$py" - "$tmp/split" <<'PY' || { cat "$tmp/split.log"; exit 1; }
import json, os, sys
out = sys.argv[1]
records = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
closing = records[-1]
evals = [r for r in records[:-1] if "eval_loss" in r]
assert [r["step"] for r in evals] == [0, 5, 10, 15, 20, 25, 30], [r["step"] for r in evals]
assert all(r["eval_samples"] == 40 and "eval_exact_match" not in r for r in evals), evals
best, new_best = None, []
for r in evals[1:]:  # eval_on_start's evaluation is logged, not judged
    if best is None or r["eval_loss"] < best:
        best = r["eval_loss"]; new_best.append(r["step"])
kept = sorted(int(d.split("-")[1]) for d in os.listdir(out) if d.startswith("checkpoint-"))
assert kept == new_best, f"save_strategy best saved {kept}; new bests at {new_best}"
assert closing["eval_samples"] == 40 and "eval_exact_match" not in closing, closing
# The end-of-run evaluation is the same loss on the same weights as the last step's.
assert abs(closing["eval_loss"] - evals[-1]["eval_loss"]) <= 1e-9 * evals[-1]["eval_loss"], (closing, evals[-1])
print(f"val_set_size ok: checkpoints at the new bests {kept}")
PY

# Resumed, the run judges on against the best it carried in its checkpoint: only a better evaluation saves.
"$bin" train "${common[@]}" --max_steps 45 --val_set_size 40 --eval_dataset_path= --eval_strategy steps --eval_steps 5 \
  --save_strategy best --resume_from_checkpoint true --output_dir "$tmp/split" > "$tmp/resume.log" 2>&1 \
  || { cat "$tmp/resume.log"; fail "the resumed run exited non-zero"; }
"$py" - "$tmp/split" <<'PY' || { cat "$tmp/resume.log"; exit 1; }
import json, os, sys
out = sys.argv[1]
records = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
first_end = next(i for i, r in enumerate(records) if "train_runtime" in r)
before = [r for r in records[:first_end] if "eval_loss" in r and r["step"] > 0]
after = [r for r in records[first_end + 1:-1] if "eval_loss" in r]
best = min(r["eval_loss"] for r in before)
resumed_at = max(int(d.split("-")[1]) for d in os.listdir(out) if d.startswith("checkpoint-") and int(d.split("-")[1]) <= 30)
new_best = []
for r in after:
    if r["eval_loss"] < best:
        best = r["eval_loss"]; new_best.append(r["step"])
kept = sorted(int(d.split("-")[1]) for d in os.listdir(out) if d.startswith("checkpoint-"))
assert [k for k in kept if k > resumed_at] == new_best, f"after the resume: checkpoints {kept}, new bests {new_best}"
assert records[-1]["best_metric"] == best, (records[-1], best)
print(f"resume ok: the best carried over; new bests after the resume {new_best}")
PY
echo "PASS"
