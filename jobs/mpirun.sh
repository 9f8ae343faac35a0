#!/usr/bin/env bash
# Launches shardft under OpenMPI on this machine, a hostfile or a SLURM allocation: one rank per core
# (or GPU), ranks bound to cores, each rank's BLAS/OpenMP threads pinned to the cores it was given.
# Usage: jobs/mpirun.sh [-np N] [--hostfile FILE] [--ranks-per-node K] [--threads-per-rank T]
#                       [--bind-to core|socket|numa|none] [--dry-run] [--] shardft-args...
#   NP, HOSTFILE, RANKS_PER_NODE, THREADS_PER_RANK, BIND_TO may also come from the environment;
#   MPIRUN_ARGS adds mpirun options (split on spaces), SHARDFT_BIN picks the binary (build/shardft).
#   -np defaults to 1, or to SLURM_NTASKS inside a SLURM allocation (where mpirun takes the nodes
#   from SLURM; `sbatch jobs/train.sbatch` is the launcher made for SLURM). Ranks fill each node
#   in turn (ranks of a node are consecutive, as ZeRO++ qgZ needs). --hostfile lines look like
#   `node01 slots=8`; --ranks-per-node K puts K ranks on each of its hosts (to make ranks on one
#   machine act as nodes, use shardft's --ranks_per_node). With more ranks than local cores and no
#   hostfile, ranks share cores, unbound, and yield while they wait. --dry-run prints the command.
# For `train`, SIGTERM or SIGINT (Ctrl-C) to this script stops the run after its current step with a
# checkpoint and exit 0 (passed on as SIGUSR1, see below); a second SIGINT ends it at once.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
np=${NP:-${SLURM_NTASKS:-1}}; hostfile=${HOSTFILE:-}; per_node=${RANKS_PER_NODE:-}
threads=${THREADS_PER_RANK:-1}; bind=${BIND_TO:-core}; dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    -np|--np|-n) np=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    --ranks-per-node) per_node=$2; shift 2 ;;
    --threads-per-rank) threads=$2; shift 2 ;;
    --bind-to) bind=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
for v in "$np" "$threads" ${per_node:+"$per_node"}; do
  case "$v" in ''|*[!0-9]*|0) echo "mpirun.sh: '$v' is not a positive count" >&2; exit 2 ;; esac
done
[ -z "$hostfile" ] || [ -f "$hostfile" ] || { echo "mpirun.sh: hostfile '$hostfile' not found" >&2; exit 2; }
if [ -n "$per_node" ] && [ -z "$hostfile" ] && [ -z "${SLURM_JOB_ID:-}" ] && [ "$per_node" -lt "$np" ]; then
  echo "mpirun.sh: --ranks-per-node $per_node places ranks on several hosts: give --hostfile (to make ranks" \
    "on this machine act as nodes, pass shardft --ranks_per_node $per_node instead)" >&2
  exit 2
fi
bin=${SHARDFT_BIN:-$root/build/shardft}
[ "$dry" = 1 ] || [ -x "$bin" ] || { echo "mpirun.sh: $bin not built; run jobs/build.sh first" >&2; exit 1; }

# Where ranks go: K per node, or node by node filling each node's slots; T cores per rank.
if [ -n "$per_node" ]; then map="ppr:${per_node}:node"; else map=slot; fi
[ "$threads" -gt 1 ] && map="$map:PE=$threads"
args=(-np "$np" --map-by "$map" -x OPENBLAS_NUM_THREADS="$threads" -x OMP_NUM_THREADS="$threads")
[ -n "$hostfile" ] && args+=(--hostfile "$hostfile")
# Oversubscribed ranks must yield the core while they wait, or they spin against the ranks computing.
if [ -z "$hostfile" ] && [ -z "${SLURM_JOB_ID:-}" ] && [ $((np * threads)) -gt "$(nproc)" ]; then
  args=(-np "$np" --map-by "${map%%:PE=*}" -x OPENBLAS_NUM_THREADS="$threads" -x OMP_NUM_THREADS="$threads"
        --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
else
  args+=(--bind-to "$bind")
fi
# shellcheck disable=SC2206
args+=(${MPIRUN_ARGS:-})
if [ "$(id -u)" -eq 0 ]; then  # containers and CI run as root; OpenMPI refuses that unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads
if [ "$dry" = 1 ]; then echo mpirun "${args[@]}" "$bin" "$@"; exit 0; fi
# Rank 0's stdout reaches this terminal, if it is one: the progress bar may go there (io/progress_bar.hpp).
[ -t 1 ] && args+=(-x SHARDFT_TERMINAL=1)
[ "${1:-}" = train ] || exec mpirun "${args[@]}" "$bin" "$@"

# Training: SIGTERM or SIGINT (Ctrl-C) to this script reaches the ranks as SIGUSR1, which Open MPI
# forwards as it is: they finish the step, save a checkpoint and exit 0, and so does this script.
# Open MPI 4.1's mpirun, signalled itself, would not wait: on SIGTERM/SIGINT it sends the ranks SIGCONT,
# SIGTERM odls_base_sigkill_timeout (1 s) later and SIGKILL after as long again, and exits 1 whatever
# the ranks did (raising the timeout also delays every failed run's exit by twice as long). So mpirun
# runs in a process group of its own (set -m), where a Ctrl-C at the terminal does not reach it.
# A second SIGINT ends the ranks at once (non-zero exit; the last saved checkpoint stays as it was).
set -m
mpirun "${args[@]}" "$bin" "$@" &
pid=$!
set +m
signals=0
on_signal() {
  signals=$((signals + 1))
  if [ "$signals" -gt 1 ] && [ "$1" = INT ]; then
    echo "mpirun.sh: second SIGINT: ending the ranks now, without a checkpoint of this step" >&2
    kill -TERM "$pid" 2> /dev/null || true
  else
    echo "mpirun.sh: SIG$1: passing SIGUSR1 to the ranks: they finish the step, save a checkpoint and exit" \
      "(Ctrl-C again to abort)" >&2
    kill -USR1 "$pid" 2> /dev/null || true
  fi
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
# `wait` returns early (status > 128) when a trapped signal arrives: wait again until mpirun is gone.
while kill -0 "$pid" 2> /dev/null; do wait "$pid" || true; done
rc=0
wait "$pid" || rc=$?
exit "$rc"
