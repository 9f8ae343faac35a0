#!/usr/bin/env bash
# fp16 with dynamic loss scaling end to end:
# 1. a real overflow (not injected): initial_scale_power 30 makes the fp16 activation gradients
#    overflow 65504, so the first steps are skipped and the scale halves until training goes on; then a
#    resume from a checkpoint taken after the skips continues bit-identically (same losses, same scale).
# 2. the default recipe (jobs/recipes/default.yaml, 2 ranks through jobs/mpirun.sh) with fp16: true reaches
#    the held-out exact match of the same run with bf16: true (both run here, about 20 s each on an idle
#    machine; measured: bf16 EM 1.0, eval loss 2.77e-4; fp16 EM 1.0, eval loss 3.03e-4).
# Usage: fp16_default_run.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 SHARDFT_BIN=$bin
fail() { echo "FAIL: $*"; exit 1; }

short=(train --config jobs/recipes/default.yaml --fp16 --initial_scale_power 30 --hysteresis 1 --max_steps 30
       --logging_steps 1 --do_eval false --zero_stage 3)
timeout 300 bash jobs/mpirun.sh -np 2 -- "${short[@]}" --save_steps 15 --output_dir "$tmp/full" > "$tmp/full.log" 2>&1 \
  || { cat "$tmp/full.log"; fail "fp16 run with overflowing steps exited non-zero"; }
grep -q "fp16 gradient overflow at loss scale 1.07374e+09; update skipped, loss scale now 5.36871e+08" "$tmp/full.log" \
  || { cat "$tmp/full.log"; fail "the first step did not overflow and halve the scale"; }
timeout 300 bash jobs/mpirun.sh -np 2 -- "${short[@]}" --output_dir "$tmp/resumed" \
  --resume_from_checkpoint "$tmp/full/checkpoint-15" > "$tmp/resumed.log" 2>&1 \
  || { cat "$tmp/resumed.log"; fail "fp16 resume exited non-zero"; }
python3 - "$tmp/full/metrics.jsonl" "$tmp/resumed/metrics.jsonl" <<'PY' || exit 1
import json, sys
full = [json.loads(l) for l in open(sys.argv[1])]
resumed = [json.loads(l) for l in open(sys.argv[2])]
steps, summary = [l for l in full if "step" in l], full[-1]
assert all("loss_scale" in s for s in steps), "fp16 metrics lines lack loss_scale"
skipped = summary["skipped_steps"]
assert 0 < skipped < 15, f"expected some skipped steps before step 15, got {skipped}"
scales = [s["loss_scale"] for s in steps]
assert scales[0] == 2.0**29 and scales[skipped - 1] == 2.0**(30 - skipped), scales
assert all(s == scales[skipped - 1] for s in scales[skipped - 1:]), f"the scale moved after recovering: {scales}"
assert steps[-1]["loss"] < 0.8 * steps[skipped]["loss"], "training did not go on after the skipped steps"
a = {s["step"]: (s["loss"], s["loss_scale"], s["learning_rate"]) for s in steps}
b = {s["step"]: (s["loss"], s["loss_scale"], s["learning_rate"]) for s in resumed if "step" in s}
assert sorted(b) == list(range(16, 31)), sorted(b)
diff = [k for k in b if a[k] != b[k]]
assert not diff, f"resume is not bit-identical at steps {diff}: {[(a[k], b[k]) for k in diff]}"
assert resumed[-1]["skipped_steps"] == skipped, "the resumed run lost the skipped-step count"
print(f"  {skipped} steps skipped, scale 2^30 -> 2^{30 - skipped}; resume from step 15 bit-identical")
PY
cmp -s "$tmp/full/model.safetensors" "$tmp/resumed/model.safetensors" || fail "resumed final weights differ"

timeout 600 bash jobs/mpirun.sh -np 2 -- train --config jobs/recipes/default.yaml --fp16 --output_dir "$tmp/default" \
  > "$tmp/default.log" 2>&1 || { tail -20 "$tmp/default.log"; fail "the fp16 default run exited non-zero"; }
grep -E "'loss_scale'" "$tmp/default.log" | tail -1
grep -E "^fp16: " "$tmp/default.log" || fail "no fp16 summary line"
timeout 600 bash jobs/mpirun.sh -np 2 -- train --config jobs/recipes/default.yaml --bf16 --output_dir "$tmp/bf16" \
  > "$tmp/bf16.log" 2>&1 || { tail -20 "$tmp/bf16.log"; fail "the bf16 default run exited non-zero"; }
python3 - "$tmp/default/metrics.jsonl" "$tmp/bf16/metrics.jsonl" <<'PY' || exit 1
import json, sys
fp16 = [json.loads(l) for l in open(sys.argv[1])][-1]
bf16 = [json.loads(l) for l in open(sys.argv[2])][-1]
print(f"  default run, eval exact match / eval loss: fp16 {fp16['eval_exact_match']} / {fp16['eval_loss']:.3g} "
      f"({fp16['skipped_steps']} steps skipped), bf16 {bf16['eval_exact_match']} / {bf16['eval_loss']:.3g}")
assert fp16["eval_exact_match"] >= bf16["eval_exact_match"], "fp16 exact match is below bf16's"
PY
echo "ok"
