#!/usr/bin/env bash
# One run per output_dir, also over time: a fresh run into a folder holding an earlier run's checkpoints
# or metrics stops at start (exit 2, naming them, nothing touched) unless overwrite_output_dir clears them
# (each named on the log); a resumed run goes on as the same run; rotation (save_total_limit) deletes only
# the checkpoints of its own run (run_id in their metadata), never another run's, and `latest` always
# names a checkpoint that exists.
# Usage: output_dir_one_run.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
run() {  # OUTPUT_DIR [overrides]
  local out=$1; shift
  timeout 300 "$bin" train --config jobs/recipes/default.yaml --overwrite_output_dir false --do_eval false \
    --save_steps 1 --output_dir "$out" "$@"
}
latest_exists() { [ -f "$1/$(cat "$1/latest")/metadata.json" ] || fail "$1/latest names $(cat "$1/latest"), which does not exist"; }

run "$tmp/a" --max_steps 3 > "$tmp/a1.log" 2>&1 || { tail -5 "$tmp/a1.log"; fail "first run"; }
cp "$tmp/a/metrics.jsonl" "$tmp/a_metrics"

# 1. a second fresh run: refused, naming what is there; the first run's files untouched
run "$tmp/a" --max_steps 2 > "$tmp/a2.log" 2>&1
[ $? -eq 2 ] || { tail -5 "$tmp/a2.log"; fail "a fresh run into a used output_dir: want exit 2"; }
grep -qF "output_dir '$tmp/a' holds an earlier run (checkpoint-1, checkpoint-2, checkpoint-3, latest, metrics.jsonl)" "$tmp/a2.log" \
  || { tail -3 "$tmp/a2.log"; fail "the refusal does not name what is there"; }
cmp -s "$tmp/a/metrics.jsonl" "$tmp/a_metrics" || fail "the refused run changed metrics.jsonl"
[ -d "$tmp/a/checkpoint-3" ] || fail "the refused run removed a checkpoint"

# 2. resume: the same run goes on (save_total_limit rotates its own checkpoints)
run "$tmp/a" --max_steps 5 --resume_from_checkpoint true --save_total_limit 2 > "$tmp/a3.log" 2>&1 \
  || { tail -5 "$tmp/a3.log"; fail "resume"; }
[ "$(ls -d "$tmp"/a/checkpoint-* | xargs -n1 basename | tr '\n' ' ')" = "checkpoint-4 checkpoint-5 " ] \
  || fail "after the resumed run with save_total_limit 2: $(ls "$tmp/a")"
grep -q "save_total_limit 2: removed checkpoint-1" "$tmp/a3.log" || { cat "$tmp/a3.log"; fail "rotation does not log what it removes"; }
latest_exists "$tmp/a"

# 3. another run's checkpoints are never rotated away or replaced: run b resuming its own checkpoint into
# a's folder is refused (its checkpoint-N would collide with a's); nothing of a's is touched
run "$tmp/b" --max_steps 1 --seed 7 > "$tmp/b1.log" 2>&1 || { tail -5 "$tmp/b1.log"; fail "run b"; }
run "$tmp/a" --max_steps 4 --seed 7 --resume_from_checkpoint "$tmp/b/checkpoint-1" > "$tmp/b2.log" 2>&1
[ $? -eq 2 ] && grep -qF "output_dir '$tmp/a' holds checkpoints of another run (checkpoint-4, checkpoint-5)" "$tmp/b2.log" \
  || { tail -3 "$tmp/b2.log"; fail "resuming run b into a's output_dir"; }
[ -f "$tmp/a/checkpoint-4/metadata.json" ] && [ -f "$tmp/a/checkpoint-5/metadata.json" ] || fail "the refused resume touched a's checkpoints"
latest_exists "$tmp/a"

# 4. overwrite_output_dir: the earlier runs' files are removed first and named
run "$tmp/a" --max_steps 1 --overwrite_output_dir true > "$tmp/a4.log" 2>&1 || { tail -5 "$tmp/a4.log"; fail "overwrite run"; }
grep -q "overwrite_output_dir: removed checkpoint-4, checkpoint-5, latest, metrics.jsonl from $tmp/a" "$tmp/a4.log" \
  || { grep overwrite "$tmp/a4.log"; fail "overwrite_output_dir does not name what it removed"; }
[ "$(ls -d "$tmp"/a/checkpoint-* | xargs -n1 basename | tr '\n' ' ')" = "checkpoint-1 " ] || fail "after overwrite: $(ls "$tmp/a")"
[ "$(wc -l < "$tmp/a/metrics.jsonl")" -le 3 ] || fail "metrics.jsonl still holds the earlier runs' records"
latest_exists "$tmp/a"
echo "ok"
