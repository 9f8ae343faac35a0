#!/usr/bin/env bash
# Builds shardft_bench, runs the whole perf suite on one core with one BLAS thread, writes
# perf/results/latest.json and, when perf/baselines/cpu-2core.json exists, compares against it
# (exit status 1 on a regression beyond the threshold).
#
#   perf/run.sh                               # everything (about a minute and a half)
#   perf/run.sh --benchmark_filter='^gemm/'   # extra arguments go to shardft_bench
#
# Environment:
#   BUILD_DIR            build directory (default build-perf/ in the repo root)
#   PERF_CPU             core to pin to with taskset (default 0; empty: no pinning)
#   PERF_MIN_TIME        --benchmark_min_time in seconds (default 0.1)
#   PERF_REPETITIONS     --benchmark_repetitions, interleaved at random; the JSON keeps
#                        mean/median/stddev/cv and compare.py reads the median (default 5)
#   PERF_THRESHOLD       compare.py --threshold (default 0.10)
#   PERF_BASELINE        baseline file (default perf/baselines/cpu-2core.json)
#   PERF_SAVE_BASELINE=1 copy the new results over the baseline instead of comparing
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-perf}
results=$root/perf/results
out=$results/latest.json
baseline=${PERF_BASELINE:-$root/perf/baselines/cpu-2core.json}
cpu=${PERF_CPU-0}

cmake -S "$root" -B "$build" -DSHARDFT_BUILD_PERF=ON -DSHARDFT_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target shardft_bench -j"$(nproc 2>/dev/null || echo 2)"
bench=$build/perf/shardft_bench

pin=()
if [[ -n "$cpu" ]] && command -v taskset >/dev/null 2>&1; then
  pin=(taskset -c "$cpu")
else
  echo "run.sh: not pinning (taskset missing or PERF_CPU empty)" >&2
fi

mkdir -p "$results"
echo "run.sh: load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" >&2
start=$(date +%s)
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "${pin[@]}" "$bench" \
  --benchmark_min_time="${PERF_MIN_TIME:-0.1}" \
  --benchmark_repetitions="${PERF_REPETITIONS:-5}" \
  --benchmark_report_aggregates_only=true \
  --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out" --benchmark_out_format=json \
  "$@"
echo "run.sh: suite took $(( $(date +%s) - start )) s; results in ${out#"$root"/}" >&2

if [[ "${PERF_SAVE_BASELINE:-0}" == 1 ]]; then
  mkdir -p "$(dirname "$baseline")"
  cp "$out" "$baseline"
  echo "run.sh: saved as baseline ${baseline#"$root"/}" >&2
elif [[ -f "$baseline" ]]; then
  echo
  python3 "$root/perf/compare.py" "$baseline" "$out" --threshold "${PERF_THRESHOLD:-0.10}"
else
  echo "run.sh: no baseline at ${baseline#"$root"/}; PERF_SAVE_BASELINE=1 perf/run.sh makes one" >&2
fi
