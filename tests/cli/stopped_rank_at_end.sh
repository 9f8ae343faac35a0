#!/usr/bin/env bash
# No rank left waiting at the end: rank 1 of a 2-rank run stops (SIGSTOP, SHARDFT_FAULT=1:end:stop) after
# the run's last collective; rank 0's end-of-run barrier gives up after collective_timeout_s 10, names
# the wait, and the job ends non-zero (without the barrier rank 0 waited in MPI_Finalize forever).
# Usage: stopped_rank_at_end.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; tail -n 20 "$tmp/run.log"; exit 1; }

start=$(date +%s)
SHARDFT_FAULT=1:end:stop timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" \
  train --config jobs/recipes/default.yaml --max_steps 3 --save_steps 0 --do_eval false --collective_timeout_s 10 \
  --output_dir "$tmp/out" > "$tmp/run.log" 2>&1
code=$?
took=$(( $(date +%s) - start ))
echo "job ended with exit $code after ${took}s"
[ "$code" -ne 124 ] || fail "the job was still running after 120 s: rank 0 waited for the stopped rank"
[ "$code" -ne 0 ] || fail "the job exited 0 although a rank never reached the end"
grep -qF "saved the model to $tmp/out in fp32" "$tmp/run.log" || fail "the run did not get to its end"
grep -E "collective timeout: rank 0 waited [0-9.]+ s for barrier on group 'world' \(rank 0 of 2, mpi\), past collective_timeout_s 10" \
  "$tmp/run.log" || fail "no message naming the end-of-run barrier"
echo "stopped_rank_at_end: ok"
