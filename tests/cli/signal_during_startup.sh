#!/usr/bin/env bash
# A stop signal that arrives while a training run is still starting (MPI, Kokkos, the data) counts like
# one during training: the run does its first step, saves a checkpoint and exits 0, instead of dying of
# the signal (exit 143) before its handlers exist.
# Usage: signal_during_startup.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

for sig in TERM USR1; do
  "$bin" train --config jobs/recipes/default.yaml --max_steps 50 --do_eval false --output_dir "$tmp/$sig" \
    > "$tmp/$sig.log" 2>&1 &
  pid=$!
  # As soon as the process has its handlers (SigCgt in /proc), still before MPI and Kokkos start. Not
  # earlier: while the dynamic loader maps the binary's libraries no program has a handler yet, and under
  # load that takes longer than any fixed sleep (a 0.15 s one failed on a busy machine).
  num=$(kill -l "$sig")
  for _ in $(seq 500); do
    caught=$(awk '/^SigCgt:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    [ -n "$caught" ] && (( (16#$caught >> (num - 1)) & 1 )) && break
    sleep 0.01
  done
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] || { tail -5 "$tmp/$sig.log"; fail "SIG$sig during start-up: exit $rc (want 0)"; }
  grep -q "preempted: stopped after step 1 on SIG$sig with a checkpoint" "$tmp/$sig.log" \
    || { tail -5 "$tmp/$sig.log"; fail "SIG$sig during start-up: no stop after step 1"; }
  [ -f "$tmp/$sig/checkpoint-1/metadata.json" ] || fail "SIG$sig during start-up: no checkpoint-1"
done
echo "ok"
