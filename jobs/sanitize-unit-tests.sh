#!/usr/bin/env bash
# Builds the unit tests with ASan + UBSan (gcc, -O1) into build-asan/ and runs them (2 cores: 7-10 min).
# Not part of jobs/run-tests.sh: with it a fresh clone's suite took 25 min 12 s, past the 25-minute budget.
# Leak checking is off: OpenMPI and Kokkos keep allocations for the life of the process.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SHARDFT_ASAN_BUILD_DIR:-$root/build-asan}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DSHARDFT_BUILD_TESTS=ON -DSHARDFT_BUILD_PERF=OFF -DSHARDFT_WITH_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" ${SHARDFT_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target shardft_unit_tests
export ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
cd "$build" && ctest -R '^[A-Z]' --output-on-failure -j"$(nproc)" --timeout 1200
