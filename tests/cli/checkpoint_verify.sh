#!/usr/bin/env bash
# Every read of a checkpoint verifies it (issue 17, items 1, 2, 7, 9): one flipped bit in an exp_avg
# dataset of one rank file is refused with exit 2 naming the file (its whole-file digest) by an explicit resume,
# consolidate, generate, eval and inspect, and skipped by `resume_from_checkpoint: true`, which falls
# back to the previous checkpoint and continues bit for bit; an edited "step" in metadata.json breaks
# its seal; a save removes the .tmp leftovers of a killed save; a failed save removes its .tmp and
# keeps `latest`; an output_dir that cannot be created is exit 2 naming the key and the path.
# Usage: checkpoint_verify.sh SHARDFT_BINARY SOURCE_DIR H5_OFFSET_HELPER
set -u
bin=$1; src=$2; h5_offset=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run LOGNAME args...: 2 ranks, ZeRO-3 (each rank reads only its own rank file)
  local name=$1; shift
  timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train \
    --config jobs/recipes/default.yaml --logging_steps 1 --do_eval false --zero_stage 3 --save_steps 2 "$@" \
    > "$tmp/$name.log" 2>&1
}
# expect2 LOGNAME TEXT: the command that wrote LOGNAME exited 2 ($code) and its log has TEXT.
expect2() {
  [ "$code" -eq 2 ] || { cat "$tmp/$1.log"; fail "$1: exit $code, expected 2"; }
  grep -qF -- "$2" "$tmp/$1.log" || { cat "$tmp/$1.log"; fail "$1: the error lacks '$2'"; }
  echo "ok   $1 (exit 2): $(grep -F -- "$2" "$tmp/$1.log" | head -1 | cut -c1-220)"
}
flip_bit() {  # flip_bit FILE DATASET: one bit of element 5
  local at; at=$("$h5_offset" "$1" "$2") || fail "no offset for $2 in $1"
  python3 - "$1" $((at + 5 * 4 + 2)) <<'PY'
import sys
p, at = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(at); b = f.read(1)[0]; f.seek(at); f.write(bytes([b ^ 0x04]))
PY
}
# same_losses A B: B's per-step losses equal A's bit for bit at B's steps
same_losses() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a = {l["step"]: l["loss"] for l in map(json.loads, open(sys.argv[1])) if "step" in l}
b = {l["step"]: l["loss"] for l in map(json.loads, open(sys.argv[2])) if "step" in l}
assert b and all(a[k] == b[k] for k in b), f"losses differ: {a} vs {b}"
PY
}

# Reference: 4 steps, checkpoints 2 and 4.
run ref --max_steps 4 --output_dir "$tmp/ref" || { cat "$tmp/ref.log"; fail "reference run"; }
[ -d "$tmp/ref/checkpoint-2" ] && [ -d "$tmp/ref/checkpoint-4" ] || fail "no checkpoints 2 and 4"
grep -q '"seal": "xxh3_64:' "$tmp/ref/checkpoint-4/metadata.json" || fail "metadata.json has no seal"
"$bin" inspect "$tmp/ref/checkpoint-4" > "$tmp/inspect-good.log" 2>&1 || { cat "$tmp/inspect-good.log"; fail "inspect of a good checkpoint"; }
grep -q "seal ok" "$tmp/inspect-good.log" || fail "inspect does not report the seal"
for d in dmg meta nogood failsave; do cp -r "$tmp/ref" "$tmp/$d"; done

echo "one flipped bit in exp_avg of rank-00001.h5 (read by rank 1 only):"
flip_bit "$tmp/dmg/checkpoint-4/rank-00001.h5" exp_avg
bad="checkpoint-4/rank-00001.h5: checksum mismatch (file xxh3_64:"
run explicit --max_steps 6 --output_dir "$tmp/x" --resume_from_checkpoint "$tmp/dmg/checkpoint-4"; code=$?
expect2 explicit "$bad"
"$bin" consolidate "$tmp/dmg/checkpoint-4" --output "$tmp/hf" > "$tmp/consolidate.log" 2>&1; code=$?
expect2 consolidate "$bad"
[ -e "$tmp/hf/model.safetensors" ] && fail "consolidate wrote a model from a damaged checkpoint"
"$bin" generate --model "$tmp/dmg/checkpoint-4" --prompt "upper: abc" > "$tmp/generate.log" 2>&1; code=$?
expect2 generate "$bad"
"$bin" eval --config jobs/recipes/default.yaml --output_dir "$tmp/dmg/checkpoint-4" --eval_samples 4 > "$tmp/eval.log" 2>&1; code=$?
expect2 eval "$bad"
"$bin" inspect "$tmp/dmg/checkpoint-4" > "$tmp/inspect.log" 2>&1; code=$?
expect2 inspect "$bad"
# The undamaged checkpoint evaluates (eval reads a checkpoint's master weights too).
"$bin" eval --config jobs/recipes/default.yaml --output_dir "$tmp/dmg/checkpoint-2" --eval_samples 4 > "$tmp/eval2.log" 2>&1 \
  || { cat "$tmp/eval2.log"; fail "eval of a good checkpoint"; }

echo "resume_from_checkpoint: true skips it, and a save removes what a killed save left behind:"
mkdir -p "$tmp/dmg/checkpoint-3.tmp" && echo partial > "$tmp/dmg/checkpoint-3.tmp/rank-00000.h5"
cp "$tmp/ref/metrics.jsonl" "$tmp/ref-metrics.jsonl"
run fallback --max_steps 4 --output_dir "$tmp/dmg" --resume_from_checkpoint true || { cat "$tmp/fallback.log"; fail "fallback resume"; }
grep -qF "resume: skipping damaged $tmp/dmg/checkpoint-4: rank 1: " "$tmp/fallback.log" || { cat "$tmp/fallback.log"; fail "the skipped checkpoint is not named"; }
grep -qF "$bad" "$tmp/fallback.log" || fail "the reason for skipping is not given"
grep -q "resumed from .*checkpoint-2 at step 2" "$tmp/fallback.log" || fail "did not fall back to checkpoint-2"
same_losses "$tmp/ref-metrics.jsonl" "$tmp/dmg/metrics.jsonl" || fail "the fallback run's losses differ from the uninterrupted run"
echo "ok   fell back to checkpoint-2; steps 3-4 equal the uninterrupted run"
[ -e "$tmp/dmg/checkpoint-3.tmp" ] && fail "the stale checkpoint-3.tmp survived a save"
grep -q "save: removed .*checkpoint-3.tmp left by an interrupted save" "$tmp/fallback.log" || fail "the removal is not logged"
echo "ok   stale checkpoint-3.tmp removed at the next save"

echo "metadata.json edited (\"step\": 4 -> 2):"
sed -i 's/"step": 4,/"step": 2,/' "$tmp/meta/checkpoint-4/metadata.json"
grep -q '"step": 2,' "$tmp/meta/checkpoint-4/metadata.json" || fail "the edit did not apply"
run meta-explicit --max_steps 6 --output_dir "$tmp/x" --resume_from_checkpoint "$tmp/meta/checkpoint-4"; code=$?
expect2 meta-explicit "checkpoint-4/metadata.json: seal mismatch"
"$bin" consolidate "$tmp/meta/checkpoint-4" --output "$tmp/hf2" > "$tmp/meta-consolidate.log" 2>&1; code=$?
expect2 meta-consolidate "checkpoint-4/metadata.json: seal mismatch"
run meta-true --max_steps 4 --output_dir "$tmp/meta" --resume_from_checkpoint true || { cat "$tmp/meta-true.log"; fail "resume true past edited metadata"; }
grep -q "skipping damaged .*checkpoint-4: .*seal mismatch" "$tmp/meta-true.log" || { cat "$tmp/meta-true.log"; fail "edited metadata not skipped"; }
grep -q "resumed from .*checkpoint-2 at step 2" "$tmp/meta-true.log" || fail "did not fall back to checkpoint-2"
echo "ok   meta-true: skipped the edited checkpoint-4, resumed from checkpoint-2"

echo "no checkpoint verifies:"
flip_bit "$tmp/nogood/checkpoint-4/rank-00000.h5" exp_avg
flip_bit "$tmp/nogood/checkpoint-2/rank-00001.h5" master
run nogood --max_steps 4 --output_dir "$tmp/nogood" --resume_from_checkpoint true; code=$?
expect2 nogood "no checkpoint in output_dir '$tmp/nogood' verifies"
grep -qF "checkpoint-2/rank-00001.h5: checksum mismatch" "$tmp/nogood.log" || fail "nogood: checkpoint-2 not listed"

echo "a failed save removes its .tmp and keeps the last good checkpoint:"
rm -rf "$tmp/failsave/checkpoint-4" && echo checkpoint-2 > "$tmp/failsave/latest"
SHARDFT_FAIL_IN_SAVE=1:4 run failsave --max_steps 4 --output_dir "$tmp/failsave" --resume_from_checkpoint true; code=$?
expect2 failsave "output_dir '$tmp/failsave': saving checkpoint-4 failed: rank 1: "
grep -qF "the last good checkpoint is kept (latest: checkpoint-2)" "$tmp/failsave.log" || fail "failsave: latest not named"
[ -e "$tmp/failsave/checkpoint-4.tmp" ] && fail "the failed save left checkpoint-4.tmp"
[ -e "$tmp/failsave/checkpoint-4" ] && fail "the failed save produced checkpoint-4"
[ "$(cat "$tmp/failsave/latest")" = checkpoint-2 ] || fail "latest changed"
"$bin" inspect "$tmp/failsave/checkpoint-2" > /dev/null 2>&1 || fail "checkpoint-2 damaged by the failed save"

echo "output paths that cannot be created:"
touch "$tmp/afile"
run outdir --max_steps 1 --output_dir "$tmp/afile/out"; code=$?
expect2 outdir "output_dir: cannot create '$tmp/afile/out'"
"$bin" consolidate "$tmp/ref/checkpoint-4" --output "$tmp/afile/hf" > "$tmp/cons-out.log" 2>&1; code=$?
expect2 cons-out "--output: cannot create '$tmp/afile/hf'"
echo "checkpoint_verify: ok"
