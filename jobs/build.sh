#!/usr/bin/env bash
# Configures and builds shardft into build/ (Release). Extra arguments go to `cmake --build`,
# e.g. `jobs/build.sh --target shardft`. SHARDFT_CMAKE_ARGS adds configure options.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SHARDFT_BUILD_DIR:-$root/build}
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${SHARDFT_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
grep -E "^-- shardft:" "$build.configure.log" || true
cmake --build "$build" -j"$(nproc)" "$@"
