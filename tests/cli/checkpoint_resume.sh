#!/usr/bin/env bash
# Sharded checkpoints: exact resume (bitwise, same world size), resume at another world size, stage and
# hybrid layout (1e-5), a crash in the middle of a save leaves the previous checkpoint usable, a damaged
# newest checkpoint is reported and skipped, and SIGTERM saves and exits 0.
# Usage: checkpoint_resume.sh SHARDFT_BINARY SOURCE_DIR H5_OFFSET_HELPER
set -u
bin=$1; src=$2; h5_offset=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run NP LOGNAME args...
  local np=$1 name=$2; shift 2
  timeout 300 mpirun -np "$np" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train \
    --config jobs/recipes/default.yaml --max_steps 30 --logging_steps 1 --do_eval false "$@" > "$tmp/$name.log" 2>&1
}
# compare A B TOLERANCE: the per-step losses of B equal A's at the same steps
compare() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
a = {l["step"]: l["loss"] for l in map(json.loads, open(sys.argv[1])) if "step" in l}
b = {l["step"]: l["loss"] for l in map(json.loads, open(sys.argv[2])) if "step" in l}
tol = float(sys.argv[3])
assert b and all(k in a for k in b), "resumed steps missing from the reference"
worst = max(abs(a[k] - b[k]) / abs(a[k]) for k in b)
assert worst <= tol, f"losses differ by {worst:.3e} > {tol}"
print(f"  {len(b)} resumed steps (from {min(b)}), worst relative difference {worst:.2e}")
PY
}

# Reference: 2 ranks, ZeRO-3, checkpoints every 10 steps.
run 2 full --zero_stage 3 --save_steps 10 --output_dir "$tmp/full" || { cat "$tmp/full.log"; fail "reference run"; }
[ -f "$tmp/full/checkpoint-10/metadata.json" ] && [ -f "$tmp/full/checkpoint-10/rank-00001.h5" ] || fail "no sharded checkpoint-10"
[ "$(cat "$tmp/full/latest")" = "checkpoint-30" ] || fail "latest does not name checkpoint-30"

echo "exact resume, same world size:"
run 2 exact --zero_stage 3 --output_dir "$tmp/exact" --resume_from_checkpoint "$tmp/full/checkpoint-10" || fail "exact resume"
compare "$tmp/full/metrics.jsonl" "$tmp/exact/metrics.jsonl" 0 || fail "resume is not bitwise exact"

echo "save_total_limit keeps the newest checkpoints:"
run 2 limit --zero_stage 1 --save_steps 10 --save_total_limit 2 --output_dir "$tmp/limit" || fail "save_total_limit run"
[ "$(ls "$tmp/limit" | grep -c '^checkpoint-')" = 2 ] && [ -d "$tmp/limit/checkpoint-20" ] && [ -d "$tmp/limit/checkpoint-30" ] \
  || { ls "$tmp/limit"; fail "save_total_limit 2 did not keep exactly checkpoint-20 and checkpoint-30"; }

for np in 1 4; do
  echo "exact resume at $np rank(s), ZeRO-2:"
  run $np ref$np --zero_stage 2 --per_device_train_batch_size $((16 / np)) --save_steps 10 --output_dir "$tmp/ref$np" || fail "reference run at $np"
  run $np res$np --zero_stage 2 --per_device_train_batch_size $((16 / np)) --output_dir "$tmp/res$np" --resume_from_checkpoint "$tmp/ref$np/checkpoint-20" \
    || fail "resume at $np"
  compare "$tmp/ref$np/metrics.jsonl" "$tmp/res$np/metrics.jsonl" 0 || fail "resume at $np ranks is not bitwise exact"
done

echo "resume at 1 rank, stage 1 (same global batch 16):"
run 1 one --zero_stage 1 --per_device_train_batch_size 16 --output_dir "$tmp/one" --resume_from_checkpoint "$tmp/full/checkpoint-10" || fail "1-rank resume"
compare "$tmp/full/metrics.jsonl" "$tmp/one/metrics.jsonl" 1e-5 || fail "1-rank resume diverged"

echo "saved at 4 ranks as hybrid 2x2 ZeRO-3, resumed at 2 ranks stage 1:"
run 4 hyb --zero_stage 3 --sharding_strategy HYBRID_SHARD --ranks_per_node 2 --per_device_train_batch_size 4 --save_steps 10 --output_dir "$tmp/hyb" || fail "hybrid run"
run 2 hyb2 --zero_stage 1 --per_device_train_batch_size 8 --output_dir "$tmp/hyb2" --resume_from_checkpoint "$tmp/hyb/checkpoint-10" || { cat "$tmp/hyb2.log"; fail "hybrid -> stage 1 resume"; }
compare "$tmp/hyb/metrics.jsonl" "$tmp/hyb2/metrics.jsonl" 1e-5 || fail "hybrid -> stage 1 resume diverged"

echo "a crash in the middle of saving checkpoint-20 leaves checkpoint-10 usable:"
SHARDFT_CRASH_IN_SAVE=1:20 run 2 crash --zero_stage 3 --save_steps 10 --output_dir "$tmp/crash" && fail "the crash did not happen"
[ -d "$tmp/crash/checkpoint-10" ] || fail "checkpoint-10 is gone"
[ -d "$tmp/crash/checkpoint-20" ] && fail "an interrupted save produced checkpoint-20"
cp "$tmp/crash/metrics.jsonl" "$tmp/crash-metrics.jsonl"
run 2 after --zero_stage 3 --save_steps 10 --output_dir "$tmp/crash" --resume_from_checkpoint true || { cat "$tmp/after.log"; fail "resume after the crash"; }
grep -q "resumed from .*checkpoint-10 at step 10" "$tmp/after.log" || fail "did not resume from checkpoint-10"
compare "$tmp/full/metrics.jsonl" "$tmp/crash/metrics.jsonl" 0 || fail "after the crash the losses differ from an uninterrupted run"

echo "a damaged newest checkpoint is reported and the previous good one used:"
at=$("$h5_offset" "$tmp/full/checkpoint-30/rank-00001.h5" exp_avg_sq) || fail "no offset for exp_avg_sq"
python3 - "$tmp/full/checkpoint-30/rank-00001.h5" "$at" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[int(sys.argv[2]) + 100] ^= 0xFF  # inside exp_avg_sq's raw data
open(sys.argv[1], "wb").write(bytes(data))
PY
run 2 damaged --zero_stage 3 --max_steps 30 --output_dir "$tmp/full" --resume_from_checkpoint true || { cat "$tmp/damaged.log"; fail "resume with a damaged newest checkpoint"; }
grep -q "skipping damaged .*checkpoint-30" "$tmp/damaged.log" || { cat "$tmp/damaged.log"; fail "the damaged checkpoint was not reported"; }
grep -q "resumed from .*checkpoint-20 at step 20" "$tmp/damaged.log" || fail "did not fall back to checkpoint-20"
run 2 nofile --zero_stage 3 --output_dir "$tmp/x" --resume_from_checkpoint "$tmp/hyb/checkpoint-10-missing" && fail "a missing checkpoint was accepted"
grep -q "checkpoint-10-missing" "$tmp/nofile.log" || fail "missing checkpoint error does not name it"
rm "$tmp/hyb/checkpoint-10/rank-00000.h5"
run 2 norank --zero_stage 1 --per_device_train_batch_size 8 --output_dir "$tmp/x" --resume_from_checkpoint "$tmp/hyb/checkpoint-10" && fail "a missing rank file was accepted"
grep -q "rank-00000.h5" "$tmp/norank.log" || { cat "$tmp/norank.log"; fail "missing rank file not named"; }
run 2 othermodel --zero_stage 3 --hidden_size 64 --output_dir "$tmp/x" --resume_from_checkpoint "$tmp/full/checkpoint-10" && fail "another model's checkpoint was accepted"
grep -q "another model" "$tmp/othermodel.log" || fail "incompatible model not reported"

echo "SIGTERM: the current step finishes, a checkpoint is written, exit 0, and the resume continues exactly:"
# A constant learning rate: the first run is told 400 steps, the resumed one and the reference fewer.
pre=(--lr_scheduler_type constant --warmup_ratio 0)
timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train --config jobs/recipes/default.yaml \
  --max_steps 400 --logging_steps 1 --do_eval false --zero_stage 2 "${pre[@]}" --output_dir "$tmp/pre" > "$tmp/pre.log" 2>&1 &
job=$!
for i in $(seq 1 100); do grep -q "'loss'" "$tmp/pre.log" 2>/dev/null && break; sleep 0.1; done
pkill -TERM -f "^$bin train.*$tmp/pre" || fail "no rank to signal"  # the ranks, not mpirun
wait $job; code=$?
[ $code -eq 0 ] || { cat "$tmp/pre.log"; fail "preempted job exited $code"; }
grep -q "preempted: stopped after step" "$tmp/pre.log" || fail "no preemption message"
step=$(sed -n 's/.*preempted: stopped after step \([0-9]*\).*/\1/p' "$tmp/pre.log")
[ -d "$tmp/pre/checkpoint-$step" ] || fail "no checkpoint-$step after preemption"
cp "$tmp/pre/metrics.jsonl" "$tmp/pre-first.jsonl"
timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train --config jobs/recipes/default.yaml \
  --max_steps $((step + 10)) --logging_steps 1 --do_eval false --zero_stage 2 "${pre[@]}" --output_dir "$tmp/pre" --resume_from_checkpoint true > "$tmp/pre2.log" 2>&1 \
  || fail "resume after preemption"
run 2 preref --zero_stage 2 "${pre[@]}" --max_steps $((step + 10)) --output_dir "$tmp/preref"
echo "  (preempted after step $step)"
compare "$tmp/preref/metrics.jsonl" "$tmp/pre/metrics.jsonl" 0 || fail "resume after preemption differs"
python3 -c "import json,sys; s=[json.loads(l)['step'] for l in open(sys.argv[1]) if '\"step\"' in l]; assert s==list(range(1,len(s)+1)), s" \
  "$tmp/pre/metrics.jsonl" || fail "metrics.jsonl of the resumed run does not continue the first one"
echo "checkpoint_resume: ok"
