#!/usr/bin/env bash
# A file-size limit (ulimit -f, a quota) reached while a checkpoint is written: the run ends with an
# error naming the file, exit 2, and no checkpoint-N.tmp left (SIGXFSZ would kill it silently, exit 153);
# the same when the limit is reached by the final model.safetensors (no .tmp left).
# The limit (16 MB) leaves MPI's start-up files room and is below the optimizer shard of this model (77 MB).
# Usage: file_size_limit.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }

(ulimit -f 16000; exec "$bin" train --config jobs/recipes/default.yaml --max_steps 2 --save_steps 1 --do_eval false \
  --hidden_size 512 --intermediate_size 1536 --dataset_cache_dir "" --output_dir "$tmp/out") > "$tmp/log" 2>&1
code=$?
[ $code -eq 2 ] || { tail -5 "$tmp/log"; fail "a save past the file-size limit: exit $code, expected 2"; }
grep -qE "error: output_dir '$tmp/out': saving checkpoint-1 failed: $tmp/out/checkpoint-1.tmp/rank-00000.h5: cannot write" "$tmp/log" \
  || { tail -5 "$tmp/log"; fail "no error naming the file that could not be written"; }
ls "$tmp/out" | grep -q '\.tmp$' && { ls -la "$tmp/out"; fail "a .tmp was left behind"; }

# No checkpoints: the limit is reached by the final model (26 MB of fp32 weights), with no .tmp left either.
(ulimit -f 16000; exec "$bin" train --config jobs/recipes/default.yaml --max_steps 2 --save_strategy no --do_eval false \
  --hidden_size 512 --intermediate_size 1536 --dataset_cache_dir "" --output_dir "$tmp/final") > "$tmp/log" 2>&1
code=$?
[ $code -eq 2 ] || { tail -5 "$tmp/log"; fail "a final model past the file-size limit: exit $code, expected 2"; }
grep -q "error: .*$tmp/final/model.safetensors" "$tmp/log" || { tail -5 "$tmp/log"; fail "no error naming the model file"; }
ls "$tmp/final" | grep -q '\.tmp$' && { ls -la "$tmp/final"; fail "the final model's .tmp was left behind"; }
echo "file_size_limit: ok"
