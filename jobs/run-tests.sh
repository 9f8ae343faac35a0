#!/usr/bin/env bash
# README command 2: install what is missing, build everything, run the whole test suite (ctest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs/install-deps.sh
jobs/install-test-deps.sh   # torch + transformers for the HF parity tests
SHARDFT_CMAKE_ARGS="-DSHARDFT_BUILD_TESTS=ON -DSHARDFT_BUILD_PERF=ON ${SHARDFT_CMAKE_ARGS:-}" jobs/build.sh
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
"$root/../shared/tools/check-layers.sh" "$root" 2>/dev/null || [ ! -x "$root/../shared/tools/check-layers.sh" ]
cd build && ctest --output-on-failure -j"$(nproc)" --timeout 600
