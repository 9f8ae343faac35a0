#!/usr/bin/env bash
# Launches shardft under OpenMPI on this machine or a hostfile: one rank per core (or GPU), one
# BLAS thread per rank, ranks bound to cores.
# Usage: jobs/mpirun.sh [-np N] [--hostfile FILE] [--ranks-per-node K] -- shardft-args...
#   NP / HOSTFILE / RANKS_PER_NODE may also come from the environment.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
np=${NP:-1}; hostfile=${HOSTFILE:-}; per_node=${RANKS_PER_NODE:-}
while [ $# -gt 0 ]; do
  case "$1" in
    -np|--np) np=$2; shift 2 ;;
    --hostfile) hostfile=$2; shift 2 ;;
    --ranks-per-node) per_node=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
bin=${SHARDFT_BIN:-$root/build/shardft}
[ -x "$bin" ] || { echo "mpirun.sh: $bin not built; run jobs/build.sh first" >&2; exit 1; }

args=(-np "$np" --bind-to core -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1)
[ -n "$hostfile" ] && args+=(--hostfile "$hostfile")
[ -n "$per_node" ] && args+=(--map-by "ppr:${per_node}:node")
# Oversubscribed ranks must yield the core while they wait, or they spin against the ranks computing.
[ "$np" -gt "$(nproc)" ] && args+=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
if [ "$(id -u)" -eq 0 ]; then  # containers and CI run as root; OpenMPI refuses that unless told
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
exec mpirun "${args[@]}" "$bin" "$@"
