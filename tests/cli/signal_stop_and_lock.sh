#!/usr/bin/env bash
# Stopping a 2-rank run through jobs/mpirun.sh whose steps take over 2 s: SIGTERM to mpirun.sh, SIGINT
# to its process group (a terminal's Ctrl-C) and SIGTERM to one rank each finish the step, save a
# checkpoint that verifies and exit 0 (and the SIGTERM-stopped run resumes bit-identically); a second SIGINT ends the job within seconds, non-zero, and
# `latest` still names a good checkpoint. One run per output_dir: a second run on a directory in use
# exits 2 naming the holder; the lock left by the killed run is taken over, and the log says so.
# Usage: signal_stop_and_lock.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d)
cleanup() { pkill -KILL -f "^$bin train.*$tmp/" 2> /dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export SHARDFT_BIN=$bin BIND_TO=none
fail() { echo "FAIL: $*"; exit 1; }
# Real work: a 4-layer, 256-wide model and 128 micro-batches of 8 per step (about 5 s on an idle core of
# this machine, 4 s on CI's, whose BLAS runs its best kernel; `stopped` checks that the steps took over
# 2 s, as the stop must hold for slow steps).
common=(train --config jobs/recipes/default.yaml --max_steps 40 --logging_steps 1 --do_eval false
  --lr_scheduler_type constant --warmup_ratio 0 --hidden_size 256 --intermediate_size 768 --num_hidden_layers 4
  --num_attention_heads 8 --num_key_value_heads 4 --gradient_accumulation_steps 128)

# jobs/mpirun.sh in a session of its own, as a terminal starts it (SIGINT not ignored, its own process
# group): sets $job, the script's pid, which is also its process group.
launch() {
  local name=$1; shift
  setsid env --default-signal=INT jobs/mpirun.sh -np 2 -- "${common[@]}" --output_dir "$tmp/$name" "$@" \
    > "$tmp/$name.log" 2>&1 &
  job=$!
}
await() {  # NAME REGEX SECONDS: until the log has the line
  local i
  for i in $(seq 1 $(($3 * 10))); do
    grep -qE "$2" "$tmp/$1.log" 2> /dev/null && return 0
    kill -0 "$job" 2> /dev/null || { cat "$tmp/$1.log"; fail "$1: the job ended before '$2'"; }
    sleep 0.1
  done
  cat "$tmp/$1.log"; fail "$1: no '$2' within $3 s"
}
steps_logged() { grep -c '"step"' "$tmp/$1/metrics.jsonl" 2> /dev/null || true; }
finish() {  # NAME SECONDS: waits for $job; sets $code and $took (seconds since the call)
  local t0; t0=$(date +%s)
  while kill -0 "$job" 2> /dev/null; do
    if [ $(($(date +%s) - t0)) -ge "$2" ]; then
      kill -KILL "$job"; cat "$tmp/$1.log"; fail "$1: still running $2 s after the signal"
    fi
    sleep 0.1
  done
  wait "$job"; code=$?; took=$(($(date +%s) - t0))
}
# NAME: after a stop signal the run ends within the step in progress (or the next one, where the signal
# came after that step's stop check): a step's time depends on the machine's load (a loaded OpenMP build
# takes many times the idle 5 s), so the bound is counted in steps; 600 s is only the bound for a hang.
finish_stopped() {
  local t0 n0; t0=$(date +%s); n0=$(steps_logged "$1")
  while kill -0 "$job" 2> /dev/null; do
    if [ "$(steps_logged "$1")" -gt $((n0 + 2)) ]; then
      kill -KILL "$job"; cat "$tmp/$1.log"; fail "$1: ran past step $((n0 + 2)) after the signal (at step $n0)"
    fi
    if [ $(($(date +%s) - t0)) -ge 600 ]; then
      kill -KILL "$job"; cat "$tmp/$1.log"; fail "$1: still running 600 s after the signal"
    fi
    sleep 0.1
  done
  wait "$job"; code=$?; took=$(($(date +%s) - t0))
}
verify() {  # DIR: the checkpoint `latest` names verifies; prints its step
  local name; name=$(cat "$1/latest" 2> /dev/null) || fail "$1: no latest"
  "$bin" inspect "$1/$name" > "$tmp/inspect.log" 2>&1 || { cat "$tmp/inspect.log"; fail "$1/$name does not verify"; }
  echo "${name#checkpoint-}"
}
stopped() {  # NAME SIGNAL-AS-LOGGED: exit 0, stopped on that signal, a checkpoint of that step that verifies
  [ "$code" -eq 0 ] || { cat "$tmp/$1.log"; fail "$1: exit $code, not 0"; }
  local step
  step=$(sed -n "s/^preempted: stopped after step \([0-9]*\) on $2 with a checkpoint.*/\1/p" "$tmp/$1.log")
  [ -n "$step" ] || { cat "$tmp/$1.log"; fail "$1: no 'preempted: stopped after step N on $2' line"; }
  [ "$(verify "$tmp/$1")" = "$step" ] || fail "$1: latest is not checkpoint-$step"
  local secs
  secs=$(python3 -c "import json,sys; print(min(json.loads(l)['step_seconds'] for l in open(sys.argv[1])))" \
    "$tmp/$1/metrics.jsonl")
  python3 -c "import sys; sys.exit(float(sys.argv[1]) <= 2.0)" "$secs" || fail "$1: steps of $secs s, not over 2 s"
  echo "ok   $1: stopped after step $step (steps of ${secs%.*}+ s) within ${took} s of the signal, exit 0, checkpoint-$step verifies"
}

# 1. SIGTERM to mpirun.sh, and meanwhile a second run on the same output_dir.
launch term
await term "^shardft train:" 120
jobs/mpirun.sh -np 2 -- "${common[@]}" --output_dir "$tmp/term" > "$tmp/second.log" 2>&1
second=$?
[ "$second" -eq 2 ] || { cat "$tmp/second.log"; fail "a second run on a locked output_dir exited $second, not 2"; }
holder=$(sed -n 's/^.*(host \([^,]*\), pid \([0-9]*\), started.*/\1 \2/p' "$tmp/second.log" | head -1)
[ -n "$holder" ] || { cat "$tmp/second.log"; fail "the second run does not name the lock's holder"; }
grep -q "is in use by another training run" "$tmp/second.log" || fail "the second run does not say why"
holder_pid=${holder#* }
pgrep -f "^$bin train.*$tmp/term( |$)" | grep -qx "$holder_pid" || fail "the holder named ($holder) is not a rank of the first run"
echo "ok   a second run on the same output_dir: exit 2 naming host and pid ($holder)"
kill -TERM "$job"
finish_stopped term
stopped term SIGUSR1
grep -q "mpirun.sh: SIGTERM: passing SIGUSR1 to the ranks" "$tmp/term.log" || fail "term: mpirun.sh did not say what it did"
n=$(grep -c '"step"' "$tmp/term/metrics.jsonl")
[ "$n" -ge 1 ] && python3 -c "import json,sys; s=[json.loads(l)['step'] for l in open(sys.argv[1])]; assert s==list(range(1,len(s)+1)), s" \
  "$tmp/term/metrics.jsonl" || fail "term: metrics.jsonl was touched by the second run"

# The stopped run resumes bit-identically: its next step's loss and gradient norm (metrics.jsonl holds
# doubles exactly) equal those of an uninterrupted run of the same steps.
stop=$(cat "$tmp/term/latest"); stop=${stop#checkpoint-}
launch term --resume_from_checkpoint true --max_steps $((stop + 1))
finish term 180
[ "$code" -eq 0 ] || { cat "$tmp/term.log"; fail "the resume after SIGTERM exited $code"; }
launch straight --max_steps $((stop + 1)) --save_strategy no
finish straight 300
[ "$code" -eq 0 ] || { cat "$tmp/straight.log"; fail "the uninterrupted run exited $code"; }
python3 - "$tmp/term/metrics.jsonl" "$tmp/straight/metrics.jsonl" <<'PY' || fail "the resume after SIGTERM is not bit-identical"
import json, sys
rows = [{r["step"]: (r["loss"], r["grad_norm"]) for r in map(json.loads, open(p)) if "step" in r} for p in sys.argv[1:]]
assert rows[0] == rows[1], rows
PY
echo "ok   resumed after the SIGTERM stop at step $stop: steps 1-$((stop + 1)) bit-identical to an uninterrupted run"

# 2. SIGINT to the process group: Ctrl-C at the terminal.
launch int
await int "^shardft train:" 120
kill -INT -- "-$job"
finish_stopped int
stopped int SIGUSR1

# 3. SIGTERM to one rank only: the other ranks stop with it.
launch rank
await rank "^shardft train:" 120
rank_pid=$(pgrep -n -f "^$bin train.*$tmp/rank( |$)") || fail "rank: no rank to signal"
kill -TERM "$rank_pid"
finish_stopped rank
stopped rank SIGTERM

# 4. Ctrl-C twice: the first asks for a checkpoint, the second ends the ranks at once. Steps 2x longer
# here (twice the layers: the data holds too few samples for twice the micro-batches), so that the
# second Ctrl-C, 0.5 s after the first, still finds the step running on an idle machine.
slow=(--num_hidden_layers 8)
launch twice --save_steps 1 "${slow[@]}"
await twice "^saved .*checkpoint-1$" 120
kill -INT -- "-$job"
sleep 0.5
kill -INT -- "-$job"
finish twice 20
[ "$code" -ne 0 ] || fail "twice: a second SIGINT still exited 0"
grep -q "second SIGINT" "$tmp/twice.log" || { cat "$tmp/twice.log"; fail "twice: no word of the second SIGINT"; }
good=$(verify "$tmp/twice")
echo "ok   twice: a second Ctrl-C ended the job in $took s with exit $code; latest (checkpoint-$good) verifies"
pkill -KILL -f "^$bin train.*$tmp/twice( |$)" 2> /dev/null && fail "twice: ranks were left running"
[ -s "$tmp/twice/.shardft.lock" ] || fail "twice: the killed run left no name in its lock file"

# 5. The lock of the killed run is taken over by the resume, which says so.
dead=$(cut -d' ' -f1,2 "$tmp/twice/.shardft.lock")
launch twice --resume_from_checkpoint true --max_steps $((good + 1)) "${slow[@]}"
finish twice 120
[ "$code" -eq 0 ] || { cat "$tmp/twice.log"; fail "the resume on the killed run's output_dir exited $code"; }
grep -q "took over the lock of a dead run (host ${dead% *}, pid ${dead#* }," "$tmp/twice.log" \
  || { cat "$tmp/twice.log"; fail "the takeover of the dead run's lock ($dead) was not logged"; }
grep -q "resumed from .*checkpoint-$good at step $good" "$tmp/twice.log" || fail "did not resume from checkpoint-$good"
[ -s "$tmp/twice/.shardft.lock" ] && fail "a run that ended left its name in the lock file"
echo "ok   the resume took over the dead run's lock ($dead) and said so"
echo "signal_stop_and_lock: ok"
