#!/usr/bin/env bash
# `shardft train` under mpirun: 2 ranks at ZeRO-3 train and report comm_bytes; a rank that throws or
# dies ends the whole job quickly with a message, never a hang; a rank count that cannot work is a
# clear error before any work.
# Usage: mpi_train_and_failure.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
run() { timeout 120 mpirun -np "$1" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" "${@:2}"; }
fail() { echo "FAIL: $*"; exit 1; }
common=(train --config jobs/recipes/default.yaml --max_steps 30 --logging_steps 10 --eval_samples 8)

run 2 "${common[@]}" --zero_stage 3 --output_dir "$tmp/z3" > "$tmp/z3.log" 2>&1 || { cat "$tmp/z3.log"; fail "2-rank ZeRO-3 run failed"; }
grep -q "ZeRO stage 3 over 2 ranks" "$tmp/z3.log" || fail "no startup line naming the stage and ranks"
grep -q "global batch 16 = 8 per device x 1 accumulation x 2 ranks" "$tmp/z3.log" || fail "global batch arithmetic not printed"
python3 - "$tmp/z3/metrics.jsonl" <<'PY' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert all(l["comm_bytes"] > 0 and l["peak_memory_bytes"] > 0 for l in lines[:-1]), lines[0]
assert lines[-1]["world_size"] == 2 and lines[-1]["zero_stage"] == 3, lines[-1]
print("2-rank ZeRO-3 ok:", lines[-2]["loss"], lines[-1]["eval_loss"])
PY

for kind in throw exit; do
  start=$(date +%s)
  SHARDFT_FAULT="1:5:$kind" run 2 "${common[@]}" --output_dir "$tmp/f$kind" > "$tmp/f$kind.log" 2>&1
  code=$?; took=$(( $(date +%s) - start ))
  [ $code -ne 0 ] || fail "job with a failing rank ($kind) exited 0"
  [ $code -ne 124 ] || fail "job with a failing rank ($kind) hung until the timeout"
  if [ $kind = throw ]; then
    grep -q "rank 1: error: injected fault" "$tmp/f$kind.log" || { cat "$tmp/f$kind.log"; fail "no message naming the failing rank"; }
  fi
  echo "ok   rank 1 $kind: job ended with exit $code after ${took}s"
done

run 4 train --config jobs/recipes/default.yaml --ranks_per_node 3 --output_dir "$tmp/bad" > "$tmp/bad.log" 2>&1 && fail "ranks_per_node 3 at 4 ranks was accepted"
grep -q "ranks_per_node 3 does not divide the 4 ranks" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "no clear error for ranks_per_node"; }
echo "mpi_train_and_failure: ok"
