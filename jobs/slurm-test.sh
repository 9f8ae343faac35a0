#!/usr/bin/env bash
# A real SLURM run of jobs/train.sbatch on this machine, from one command (as root):
#
#   bash jobs/slurm-test.sh
#
# Installs Debian's slurmctld, slurmd, slurm-client and munge when missing (and shardft's build
# dependencies), builds build-release/shardft unless SHARDFT_BIN names a binary, then starts by hand
# (no systemd) a private munged and a one-node cluster on loopback: a slurm.conf with this machine's
# CPUs and memory (`slurmd -C`), one partition, its own ports, state and logs in $SHARDFT_SLURM_DIR
# (default /tmp/shardft-slurm-test), so a SLURM already on the machine is not touched.
#
#   1. sbatch jobs/train.sbatch with 2 tasks and a short run of the default recipe: the job must end
#      COMPLETED with exit 0, metrics.jsonl must hold every logging step, the log the final train_loss.
#   2. Preemption: a longer run is sent SIGUSR1 through its job step (`scancel --signal=USR1`, as
#      --signal=USR1@120 does), saves a checkpoint and is requeued by train.sbatch; the requeued run
#      resumes from it and is preempted again through the batch shell (`scancel --batch
#      --signal=USR1`); the third run finishes. The job must end COMPLETED after 2 restarts with each
#      step logged exactly once in metrics.jsonl. (Slurm holds a requeued job for 2 minutes before
#      it may start again; the test lifts that with `scontrol update StartTime=now`.)
#
# Idempotent: a previous run's daemons (by their pid files) and state are removed first; the daemons
# this script starts are stopped on exit (SHARDFT_SLURM_KEEP=1 leaves them up, with SLURM_CONF printed).
# SHARDFT_SLURM_PORT (default 6917) is slurmctld's port, slurmd takes the next one.
set -euo pipefail
t0=$(date +%s)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${SHARDFT_SLURM_DIR:-/tmp/shardft-slurm-test}
port=${SHARDFT_SLURM_PORT:-6917}
timeout_s=${SHARDFT_SLURM_TIMEOUT:-300}

say() { echo "slurm-test: $*"; }
fail() {
  echo "slurm-test: FAIL: $*" >&2
  for f in "$dir"/job-*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }; done
  for f in slurmctld.log slurmd.log; do [ -f "$dir/$f" ] && { echo "--- $dir/$f" >&2; tail -n 20 "$dir/$f" >&2; }; done
  exit 1
}
[ "$(id -u)" -eq 0 ] || { echo "slurm-test: run as root (it installs packages and starts slurmd)" >&2; exit 1; }

# --- packages and binary -----------------------------------------------------------------------
missing=()
for p in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
  command -v "${p%%:*}" > /dev/null || missing+=("${p#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq > /dev/null || true
  apt-get install -y -qq --no-install-recommends "${missing[@]}" > "$root/.slurm-apt.log" 2>&1 \
    || { cat "$root/.slurm-apt.log"; exit 1; }
  rm -f "$root/.slurm-apt.log"
fi
if [ -n "${SHARDFT_BIN:-}" ]; then
  bin=$SHARDFT_BIN
else
  jobs/install-deps.sh
  SHARDFT_CMAKE_ARGS="-DSHARDFT_BUILD_TESTS=OFF -DSHARDFT_BUILD_PERF=OFF ${SHARDFT_CMAKE_ARGS:-}" \
    SHARDFT_BUILD_DIR="$root/build-release" jobs/build.sh --target shardft
  bin=$root/build-release/shardft
fi
[ -x "$bin" ] || fail "no binary at $bin"
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

# --- a fresh private cluster -------------------------------------------------------------------
stop_daemons() {
  for d in slurmd slurmctld munged; do
    local pidfile=$dir/$d.pid
    [ -f "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    if [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; then
      kill "$pid" 2> /dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2> /dev/null || true
    fi
    rm -f "$pidfile"
  done
}
stop_daemons  # left over from an interrupted run
rm -rf "$dir"
mkdir -p "$dir/munge-key" "$dir/ctld" "$dir/spool"
chmod 755 "$dir"
chmod 700 "$dir/munge-key"
if command -v mungekey > /dev/null; then
  mungekey --create --keyfile="$dir/munge-key/munge.key"
else
  dd if=/dev/urandom of="$dir/munge-key/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$dir/munge-key/munge.key"
socket=$dir/munge.socket
munged --socket="$socket" --key-file="$dir/munge-key/munge.key" --log-file="$dir/munged.log" \
  --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" || fail "munged did not start ($dir/munged.log)"

cleanup() {
  local rc=$?
  if [ "${SHARDFT_SLURM_KEEP:-0}" = 1 ]; then
    say "daemons left running: export SLURM_CONF=$dir/slurm.conf"
  else
    SLURM_CONF=$dir/slurm.conf scancel --quiet --partition=shardft 2> /dev/null || true
    stop_daemons
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
munge -S "$socket" -n | unmunge -S "$socket" > /dev/null || fail "munge round trip failed"

host=$(hostname -s)
node=$(slurmd -C | grep '^NodeName=' | sed 's/ UpTime=.*//')  # this machine's CPUs, sockets, cores, memory
cat > "$dir/slurm.conf" << EOF
# one-node test cluster written by jobs/slurm-test.sh
ClusterName=shardfttest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SchedulerType=sched/backfill
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=3600
KillWait=30
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=shardft Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start"
for _ in $(seq 100); do
  state=$(sinfo -h -n "$host" -o %T 2> /dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || fail "node $host is '$state', not idle"
say "cluster up: $node, partition shardft ($(($(date +%s) - t0)) s)"
srun --mpi=list 2>&1 | grep -q pmix || fail "this slurm has no pmix plugin (srun --mpi=list)"

job_field() { scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
wait_job() {  # JOBID: until it leaves the queue for good
  local end=$(($(date +%s) + timeout_s)) s
  while :; do
    s=$(job_field "$1" JobState)
    case "$s" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;; esac
    [ "$(date +%s)" -lt "$end" ] || fail "job $1 still $s after ${timeout_s} s"
    sleep 0.5
  done
}
wait_for() {  # SECONDS DESCRIPTION COMMAND...: until the command succeeds
  local end=$(($(date +%s) + $1)) what=$2
  shift 2
  until "$@"; do
    [ "$(date +%s)" -lt "$end" ] || fail "timed out waiting for $what"
    sleep 0.2
  done
}
requeued() { [ "$(job_field "$1" Restarts)" -ge "$2" ] && [ "$(job_field "$1" JobState)" = PENDING ]; }
release() {  # JOBID RESTARTS: Slurm holds a requeued job for 2 minutes; the test lets it start at once
  wait_for 60 "job $1 to be requeued" requeued "$1" "$2"
  scontrol update JobId="$1" StartTime=now
}
metric_losses() { python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["loss"]) for l in open(sys.argv[1]) if "\"loss\"" in l))' "$1"; }
metric_steps() { python3 -c 'import json,sys; print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1]) if "\"step\"" in l))' "$1"; }
submit() {  # NAME ARGS...: sbatch train.sbatch, 2 tasks on the one node; prints the job id
  local name=$1
  shift
  SHARDFT_BIN=$bin sbatch --parsable --job-name="$name" --nodes=1 --ntasks=2 --cpus-per-task=1 \
    --output="$dir/job-%x-%j.log" --chdir="$root" jobs/train.sbatch jobs/recipes/default.yaml "$@"
}

# --- 1: a short training run -------------------------------------------------------------------
t1=$(date +%s)
run1=$dir/run-short
id=$(submit short --max_steps 40 --logging_steps 10 --eval_samples 16 --output_dir "$run1")
say "submitted job $id (2 tasks, 40 steps)"
wait_job "$id"
log=$dir/job-short-$id.log
state=$(job_field "$id" JobState) exit_code=$(job_field "$id" ExitCode)
[ "$state" = COMPLETED ] || fail "job $id ended $state, exit $exit_code"
[ "$exit_code" = 0:0 ] || fail "job $id ended $state, exit $exit_code"
grep -q "ZeRO stage 0 over 2 ranks" "$log" || fail "job $id did not train on 2 MPI ranks"
grep -q "'train_loss'" "$log" || fail "job $id log has no final train_loss"
[ "$(metric_steps "$run1/metrics.jsonl")" = "10 20 30 40" ] || fail "metrics.jsonl steps: $(metric_steps "$run1/metrics.jsonl")"
[ -f "$run1/model.safetensors" ] || fail "no model.safetensors in $run1"
read -r -a losses <<< "$(metric_losses "$run1/metrics.jsonl")"
python3 -c 'import sys; sys.exit(not float(sys.argv[2]) < float(sys.argv[1]) - 0.5)' "${losses[0]}" "${losses[3]}" \
  || fail "job $id did not learn: losses ${losses[*]}"
say "job $id COMPLETED in $(($(date +%s) - t1)) s: $(grep -o "'train_loss': [0-9.e-]*" "$log")," \
  "metrics.jsonl steps 10..40 with losses ${losses[*]}, $(grep -o "'eval_exact_match': [0-9.e-]*" "$log" || true)"

# --- 2: preemption, requeue, resume ------------------------------------------------------------
t2=$(date +%s)
run2=$dir/run-preempt
steps=200
id=$(submit preempt --max_steps $steps --logging_steps 1 --do_eval false --output_dir "$run2")
log=$dir/job-preempt-$id.log
say "submitted job $id ($steps steps) to preempt"
lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }
resumed_times() { [ "$(grep -c '^resumed from' "$log")" -ge "$1" ]; }
running_past() { [ "$(lines "$run2/metrics.jsonl")" -gt "$1" ] && [ "$(job_field "$id" JobState)" = RUNNING ]; }
wait_for 60 "job $id to train" running_past 0
scancel --signal=USR1 "$id"  # to the job step, like --signal=USR1@120
release "$id" 1
wait_for 60 "job $id to be requeued and resume" resumed_times 1
first_stop=$(sed -n 's/^preempted: stopped after step \([0-9]*\).*/\1/p' "$log" | head -1)
[ -n "$first_stop" ] || fail "job $id: no 'preempted: stopped after step' line"
grep -q "^saved .*checkpoint-$first_stop" "$log" || fail "job $id: no checkpoint saved at step $first_stop"
grep -q "^resumed from .*checkpoint-$first_stop at step $first_stop" "$log" || fail "job $id: did not resume at $first_stop"
say "preempted through the step at step $first_stop, requeued, resumed ($(($(date +%s) - t2)) s)"
wait_for 60 "job $id to train after the resume" running_past "$first_stop"
scancel --batch --signal=USR1 "$id"  # to the batch shell, which passes it on
release "$id" 2
wait_for 60 "job $id to be requeued a second time" resumed_times 2
second_stop=$(sed -n 's/^preempted: stopped after step \([0-9]*\).*/\1/p' "$log" | sed -n 2p)
[ "${second_stop:-0}" -gt "$first_stop" ] || fail "job $id: second preemption not seen"
grep -q "^resumed from .*checkpoint-$second_stop at step $second_stop" "$log" || fail "job $id: did not resume at $second_stop"
say "preempted through the batch shell at step $second_stop, requeued, resumed ($(($(date +%s) - t2)) s)"
wait_job "$id"
state=$(job_field "$id" JobState) exit_code=$(job_field "$id" ExitCode) restarts=$(job_field "$id" Restarts)
[ "$state" = COMPLETED ] || fail "job $id ended $state, exit $exit_code"
[ "$exit_code" = 0:0 ] || fail "job $id ended $state, exit $exit_code"
[ "$restarts" = 2 ] || fail "job $id restarted $restarts times, expected 2"
grep -q "'train_loss'" "$log" || fail "job $id log has no final train_loss"
[ "$(metric_steps "$run2/metrics.jsonl")" = "$(seq -s ' ' 1 $steps)" ] \
  || fail "job $id: metrics.jsonl does not hold steps 1..$steps once each"
say "job $id COMPLETED after 2 requeues in $(($(date +%s) - t2)) s: steps 1..$steps logged once each," \
  "$(grep -o "'train_loss': [0-9.e-]*" "$log")"
# --- 3: a failing run fails the job; a cancel is not requeued ----------------------------------
id=$(submit bad --max_steps 2 --no_such_key 1 --output_dir "$dir/run-bad")
wait_job "$id"
state=$(job_field "$id" JobState) exit_code=$(job_field "$id" ExitCode)
[ "$state" = FAILED ] || fail "job $id with an unknown key ended $state, exit $exit_code"
grep -q "no_such_key" "$dir/job-bad-$id.log" || fail "job $id log does not name the unknown key"
run3=$dir/run-cancel
id=$(submit cancel --max_steps 2000 --logging_steps 1 --do_eval false --output_dir "$run3")
started() { [ "$(lines "$run3/metrics.jsonl")" -gt 0 ]; }
wait_for 60 "job $id to train" started
scancel "$id"
wait_job "$id"
state=$(job_field "$id" JobState) restarts=$(job_field "$id" Restarts)
[ "$state" = CANCELLED ] || fail "cancelled job $id ended $state"
[ "$restarts" = 0 ] || fail "cancelled job $id was requeued $restarts times"
sleep 3  # a requeue, had there been one, would show by now
[ "$(job_field "$id" JobState)" = CANCELLED ] || fail "cancelled job $id came back: $(job_field "$id" JobState)"
saved() { compgen -G "$run3/checkpoint-[0-9]*" > /dev/null; }
wait_for 30 "cancelled job $id to save a checkpoint" saved
say "job with an unknown key FAILED (exit $exit_code) naming it; scancel'ed job saved $(basename "$(compgen -G "$run3/checkpoint-[0-9]*" | tail -1)"), CANCELLED, not requeued"
say "PASS in $(($(date +%s) - t0)) s"
