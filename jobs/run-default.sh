#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the default recipe on the bundled data.
# 2 MPI ranks (NP=... to change), ZeRO stage from the recipe. Extra arguments are recipe overrides,
# e.g. `jobs/run-default.sh --max_steps 100 --zero_stage 3`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs/install-deps.sh
SHARDFT_CMAKE_ARGS="-DSHARDFT_BUILD_TESTS=OFF -DSHARDFT_BUILD_PERF=OFF ${SHARDFT_CMAKE_ARGS:-}" \
  SHARDFT_BUILD_DIR="$root/build-release" jobs/build.sh --target shardft
SHARDFT_BIN="$root/build-release/shardft" NP=${NP:-2} jobs/mpirun.sh -- train --config jobs/recipes/default.yaml "$@"
echo "metrics: $(sed -n '$p' runs/default/metrics.jsonl 2>/dev/null || true)"
