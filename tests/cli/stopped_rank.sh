#!/usr/bin/env bash
# No rank left waiting: one rank of a 2-rank training run is stopped (SIGSTOP, as a hung process or a
# node that stops answering); with collective_timeout_s 20 the other rank gives up on the collective it
# waits in, names itself, the group and the collective, and the whole job ends, non-zero, within 40 s
# of the stop (without the timeout it spun forever).
# Usage: stopped_rank.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d)
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; [ -f "$tmp/run.log" ] && tail -n 20 "$tmp/run.log"; exit 1; }

timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train \
  --config jobs/recipes/default.yaml --max_steps 100000 --save_steps 0 --logging_steps 50 --do_eval false \
  --collective_timeout_s 20 --output_dir "$tmp/out" > "$tmp/run.log" 2>&1 &
job=$!
stopped=""
cleanup() {
  [ -n "$stopped" ] && kill -CONT "$stopped" 2>/dev/null
  kill "$job" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# Rank 1, once training has started: the child of mpirun's job whose environment says so.
for _ in $(seq 1 120); do
  grep -q "'loss'" "$tmp/run.log" 2>/dev/null && break
  kill -0 "$job" 2>/dev/null || fail "the run ended before training started"
  sleep 0.5
done
grep -q "'loss'" "$tmp/run.log" || fail "no training step logged within 60 s"
# This job's ranks only (its output_dir): other tests may run 2-rank jobs of the same binary meanwhile.
for pid in $(pgrep -f "$bin train.*$tmp/out"); do
  if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then stopped=$pid; fi
done
[ -n "$stopped" ] || fail "rank 1's process not found"
kill -STOP "$stopped"
start=$(date +%s)
wait "$job"
code=$?
took=$(( $(date +%s) - start ))
echo "job ended with exit $code ${took}s after rank 1 (pid $stopped) was stopped"
stopped=""
[ "$code" -ne 124 ] || fail "the job was still running after 300 s: a stopped rank left the other waiting"
[ "$code" -ne 0 ] || fail "the job exited 0 although a rank was stopped"
[ "$took" -le 40 ] || fail "the job took ${took}s after the stop to end (limit 20 s + 20 s)"
grep -E "collective timeout: rank 0 waited [0-9.]+ s for [a-z_]+ on group '[a-z_]+' \(rank 0 of 2, mpi\), past collective_timeout_s 20" \
  "$tmp/run.log" || fail "no message naming the rank, the group and the collective"
echo "stopped_rank: ok"
