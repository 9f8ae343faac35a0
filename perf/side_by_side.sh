#!/usr/bin/env bash
# shardft's training step beside PyTorch eager's, same model, same batch, same core, in one run.
#
#   perf/side_by_side.sh            # both shapes of perf/bench_step.cpp (default and wide)
#
# shardft: shardft_bench's train_step/default_h128_L2/B16 and train_step/wide_h512_L2/B1_T512_mea (one
# rank, one BLAS thread). PyTorch: perf/torch_step.py, transformers' LlamaForCausalLM of the same
# shape in fp32, eager attention, AdamW and clipping, torch.set_num_threads(1). Both pinned to the
# same core. Needs the test venv (.cache/hfvenv, made by jobs/install-test-deps.sh) for torch.
# Writes perf/results/side_by_side.json and prints ms per step and the ratio torch / shardft
# (above 1: shardft is faster).
#
# Environment: BUILD_DIR (default build-perf/), PERF_CPU (core, default 0), PYTHON (default the venv's),
# TORCH_STEPS (timed torch steps, default 5).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-perf}
python=${PYTHON:-$root/.cache/hfvenv/bin/python}
cpu=${PERF_CPU-0}
results=$root/perf/results
mkdir -p "$results"
[[ -x "$python" ]] || { echo "side_by_side.sh: no python with torch at $python (run jobs/install-test-deps.sh)" >&2; exit 1; }

cmake -S "$root" -B "$build" -DSHARDFT_BUILD_PERF=ON -DSHARDFT_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target shardft_bench -j"$(nproc 2>/dev/null || echo 2)" >/dev/null

pin=()
if [[ -n "$cpu" ]] && command -v taskset >/dev/null 2>&1; then pin=(taskset -c "$cpu"); fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
echo "side_by_side.sh: load average: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)" >&2

"${pin[@]}" "$build/perf/shardft_bench" --benchmark_filter='^train_step/(default_h128_L2/B16|wide_h512_L2/B1_T512_mea)$' \
  --benchmark_min_time=0.5 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
  --benchmark_out="$results/side_by_side_shardft.json" --benchmark_out_format=json >/dev/null
for shape in default wide; do
  "${pin[@]}" "$python" "$root/perf/torch_step.py" --shape "$shape" --threads 1 --steps "${TORCH_STEPS:-5}" \
    >"$results/side_by_side_torch_$shape.json"
done

"$python" - "$results" <<'EOF'
import json, sys
results = sys.argv[1]
ours = {b["run_name"]: b for b in json.load(open(f"{results}/side_by_side_shardft.json"))["benchmarks"]
        if b.get("aggregate_name") == "median"}
names = {"default": "train_step/default_h128_L2/B16", "wide": "train_step/wide_h512_L2/B1_T512_mea"}
rows = []
print(f"{'shape':<8} {'shardft ms':>11} {'pytorch ms':>11} {'pytorch/shardft':>16} {'shardft GFLOP/s':>16} {'pytorch GFLOP/s':>16}")
for shape, name in names.items():
    torch = json.load(open(f"{results}/side_by_side_torch_{shape}.json"))
    b = ours[name]
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    ms = b["real_time"] * scale
    rows.append({"shape": shape, "shardft_ms": ms, "pytorch_ms": torch["ms_per_step"],
                 "ratio_pytorch_over_shardft": torch["ms_per_step"] / ms,
                 "shardft_gflops": b["GFLOPS"], "pytorch_gflops": torch["GFLOPS"], "pytorch": torch["framework"]})
    r = rows[-1]
    print(f"{shape:<8} {ms:>11.1f} {torch['ms_per_step']:>11.1f} {r['ratio_pytorch_over_shardft']:>16.2f} "
          f"{b['GFLOPS']:>16.1f} {torch['GFLOPS']:>16.1f}")
json.dump(rows, open(f"{results}/side_by_side.json", "w"), indent=1)
EOF
