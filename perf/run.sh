#!/usr/bin/env bash
# The perf regression suite, one command, three parts:
#  1. shardft_bench (kernels, GEMMs, end-to-end steps, memory) on one core with one BLAS thread:
#     perf/results/latest.json, compared with perf/baselines/cpu-2core.json;
#  2. shardft_comm_bench (collectives, the ZeRO stages' steps, the overlap rows) under mpirun at
#     PERF_COMM_RANKS ranks: perf/results/latest-comm-np2.json, compared with
#     perf/baselines/cpu-2core-comm-np2.json;
#  3. perf/cpu_vs_torch.sh: shardft's CLI beside PyTorch 2 (SDPA eager and torch.compile) on shapes S
#     and M, one thread each: perf/results/cpu_vs_torch.json, printed as a table (not a pass/fail
#     figure: PyTorch is not ours to regress); PERF_SAVE_BASELINE=1 stores it as
#     perf/baselines/cpu-2core-vs-torch.json. Its first run makes the PyTorch 2 venv (about 4 GB).
# Exit status 1 when either part has a figure worse than its baseline beyond the threshold.
#
#   perf/run.sh                               # everything (about three minutes)
#   perf/run.sh --benchmark_filter='^gemm/'   # extra arguments go to shardft_bench
#   PERF_COMM=0 perf/run.sh                   # part 1 only
#
# Environment:
#   BUILD_DIR            build directory (default build-perf/ in the repo root)
#   PERF_CPU             core to pin to with taskset (default 0; empty: no pinning)
#   PERF_MIN_TIME        --benchmark_min_time in seconds (default 0.1)
#   PERF_REPETITIONS     --benchmark_repetitions, interleaved at random; the JSON keeps
#                        mean/median/stddev/cv and compare.py reads the median (default 5)
#   PERF_THRESHOLD       compare.py --threshold (default 0.10)
#   PERF_BASELINE        baseline file (default perf/baselines/cpu-2core.json)
#   PERF_SAVE_BASELINE=1 copy the new results over the baselines instead of comparing
#   PERF_COMM            0: skip part 2 (default 1)
#   PERF_TORCH           0: skip part 3 (default 1); its own knobs are in perf/cpu_vs_torch.sh
#   PERF_COMM_RANKS      ranks of part 2 (default 2)
#   PERF_COMM_FILTER     --benchmark_filter of part 2 (default: collectives, per-stage steps, overlap;
#                        the 1.3 GB checkpoint benchmark is left out)
#   PERF_COMM_REPETITIONS --benchmark_repetitions of part 2 (default 3)
#   PERF_COMM_THRESHOLD  compare.py --threshold of part 2 (default 0.25: shared-memory collectives on
#                        a shared VM move 10-30 % run to run, see perf/README.md)
#   PERF_COMM_BASELINE   baseline of part 2 (default perf/baselines/cpu-2core-comm-np<ranks>.json)
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

# save_or_compare RESULTS BASELINE THRESHOLD: store the results as the baseline (PERF_SAVE_BASELINE=1)
# or compare them with it; status becomes 1 on a regression.
status=0
save_or_compare() {
  if [[ "${PERF_SAVE_BASELINE:-0}" == 1 ]]; then
    mkdir -p "$(dirname "$2")"
    cp "$1" "$2"
    echo "run.sh: saved as baseline ${2#"$root"/}" >&2
  elif [[ -f "$2" ]]; then
    echo
    python3 "$root/perf/compare.py" "$2" "$1" --threshold "$3" || status=1
  else
    echo "run.sh: no baseline at ${2#"$root"/}; PERF_SAVE_BASELINE=1 perf/run.sh makes one" >&2
  fi
}
save_or_compare "$out" "$baseline" "${PERF_THRESHOLD:-0.10}"

# Part 2: the collectives and the data-parallel steps, every rank running the same benchmarks in
# lockstep (perf/comm/bench_collectives.cpp); rank 0 writes the JSON.
if [[ "${PERF_COMM:-1}" == 1 ]]; then
  np=${PERF_COMM_RANKS:-2}
  comm_out=$results/latest-comm-np$np.json
  comm_baseline=${PERF_COMM_BASELINE:-$root/perf/baselines/cpu-2core-comm-np$np.json}
  cmake --build "$build" --target shardft_comm_bench -j"$(nproc 2>/dev/null || echo 2)"
  bind=(--bind-to core)
  if (( $(nproc 2>/dev/null || echo 1) < np )); then bind=(--oversubscribe --bind-to none); fi
  echo "run.sh: part 2 at $np ranks (${bind[*]})" >&2
  start=$(date +%s)
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np "$np" "${bind[@]}" -x OPENBLAS_NUM_THREADS=1 \
    "$build/perf/shardft_comm_bench" \
    --benchmark_filter="${PERF_COMM_FILTER:-^(BM_(AllReduce|ReduceScatter|AllGather|Broadcast|AllToAll|TrainStepPerStage)|overlap)/}" \
    --benchmark_repetitions="${PERF_COMM_REPETITIONS:-3}" \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$comm_out" --benchmark_out_format=json
  echo "run.sh: part 2 took $(( $(date +%s) - start )) s; results in ${comm_out#"$root"/}" >&2
  save_or_compare "$comm_out" "$comm_baseline" "${PERF_COMM_THRESHOLD:-0.25}"
fi

# Part 3: beside PyTorch 2 on the CPU, through shardft's CLI.
if [[ "${PERF_TORCH:-1}" == 1 ]]; then
  BUILD_DIR=$build bash "$root/perf/cpu_vs_torch.sh" || status=1
fi
exit $status
