#!/usr/bin/env bash
# Where a GPU training step spends its time, kernel by kernel: a short bf16 run of the llama-1b shape
# of jobs/gpu/validate.sh (run its unpack and build stages first) with SHARDFT_KERNEL_TIMES=1, which
# times every kernel by CUDA events on the compute stream (unfenced) and prints the kernels by total time,
# the device's idle time and the host phases (kernels/kernel_timer.hpp). Nsight Systems is not on the
# GPU machines here; Nsight Compute is (the probe's ncu stage), one kernel at a time.
#
#   jobs/gpu/kernel_profile.sh [LAYERS [STEPS]]     (default 16 layers, 3 steps)
#
# Output ($OUT when set, else .cache/gpu-validate-cuda/out): kernel_profile.txt (the run's log, the
# table at its end).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "jobs/gpu/kernel_profile.sh: $*" >&2; exit 2; }
layers=${1:-16}
steps=${2:-3}
state=$root/.cache/gpu-validate-cuda
prefix=$state/prefix
build=$root/build-kit-cuda
out=${OUT:-$state/out}
[ -x "$build/shardft" ] || die "no build in $build: run jobs/gpu/validate.sh unpack build first"
mkdir -p "$out"
dir=$state/profile
rm -rf "$dir"; mkdir -p "$dir"
python3 "$root/jobs/gpu/validate_util.py" bench-recipe "$dir" 989 name=profile hidden=2048 layers="$layers" heads=32 \
  kv_heads=8 inter=8192 vocab=128256 seq=2048 batch=2 steps="$steps" warmup=0 rope_theta=500000
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
(cd "$root" && SHARDFT_KERNEL_TIMES=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=2 "$prefix/bin/mpirun" -np 1 \
   --bind-to none -x SHARDFT_KERNEL_TIMES -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS \
   "$build/shardft" train --config "$dir/recipe.yaml") > "$out/kernel_profile.txt" 2>&1 \
  || { tail -n 30 "$out/kernel_profile.txt"; die "the profiled run failed (log: $out/kernel_profile.txt)"; }
sed -n '/kernel times (SHARDFT_KERNEL_TIMES/,$p' "$out/kernel_profile.txt"
