#!/usr/bin/env bash
# shardft's CLI beside PyTorch 2 on the CPU: the same Llama shapes, one thread each, the same core, in one run.
#
#   perf/cpu_vs_torch.sh                 # shapes S and M in fp32 and bf16, 3 rounds (about 10 minutes here)
#   PERF_TORCH_SHAPES=S PERF_TORCH_DTYPES=fp32 perf/cpu_vs_torch.sh
#
# Shapes (perf/torch_step.py's table): S hidden 256, 4 layers, 8/4 heads, intermediate 768, 4 x 256
# tokens (3.2 M parameters); M hidden 512, 6 layers, 8/8 heads, intermediate 1536, 2 x 512 tokens
# (20.6 M). AdamW, clipping at 1.0, every position a target. fp32; and bf16: the recipe's bf16: true
# beside torch.autocast(bf16) (bf16 matmuls, fp32 master weights and AdamW in both).
#  - shardft: `shardft train` on a generated recipe (byte tokenizer, unpacked rows truncated to the
#    sequence length, attn_implementation auto: the log-sum-exp kernels), one process, one BLAS
#    thread, no environment set by hand: the BLAS core is the one shardft picks (its `blas:` line is
#    kept in the results). Tokens/s: the median of the logged steps after PERF_TORCH_WARMUP.
#  - PyTorch 2: perf/torch_step.py in the venv .cache/torch2-venv, SDPA attention, eager and under
#    torch.compile, torch.set_num_threads(1). The venv is made on first use from PyPI (torch, numpy,
#    transformers: about 4 GB, as PyPI's Linux torch wheel is a CUDA build that runs on the CPU here).
# Each round runs every framework once per shape; the table gives the median of the rounds' tokens/s
# and the ratios shardft / PyTorch (above 1: shardft is faster). Results: perf/results/cpu_vs_torch.json
# (with the CPU's model name and the BLAS core); PERF_SAVE_BASELINE=1 also stores them as
# perf/baselines/cpu-2core-vs-torch.json.
#
# Environment: BUILD_DIR (default build-perf/), PERF_CPU (core, default 0; empty: no pinning),
# PERF_TORCH_ROUNDS (3), PERF_TORCH_STEPS (timed steps, 8), PERF_TORCH_WARMUP (steps not timed, 3:
# torch.compile compiles in the first), PERF_TORCH_SHAPES ("S M"), PERF_TORCH_DTYPES ("fp32 bf16"),
# TORCH2_PYTHON (a python with torch 2 and transformers instead of the venv).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD_DIR:-$root/build-perf}
cpu=${PERF_CPU-0}
rounds=${PERF_TORCH_ROUNDS:-3} steps=${PERF_TORCH_STEPS:-8} warmup=${PERF_TORCH_WARMUP:-3}
read -ra shapes <<<"${PERF_TORCH_SHAPES:-S M}"
read -ra dtypes <<<"${PERF_TORCH_DTYPES:-fp32 bf16}"
results=$root/perf/results
work=$results/cpu_vs_torch
die() { echo "cpu_vs_torch.sh: $*" >&2; exit 2; }
for n in "$rounds" "$steps" "$warmup"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "rounds, steps and warm-up must be positive integers"; done
for s in "${shapes[@]}"; do [[ $s == S || $s == M ]] || die "unknown shape '$s' (S or M)"; done
for t in "${dtypes[@]}"; do [[ $t == fp32 || $t == bf16 ]] || die "unknown dtype '$t' (fp32 or bf16)"; done
cases=()
for s in "${shapes[@]}"; do for t in "${dtypes[@]}"; do cases+=("$s-$t"); done; done

python=${TORCH2_PYTHON:-}
if [[ -z "$python" ]]; then
  venv=$root/.cache/torch2-venv
  python=$venv/bin/python
  if ! "$python" -c "import torch, transformers" >/dev/null 2>&1; then
    echo "cpu_vs_torch.sh: making $venv from PyPI (torch, numpy, transformers; about 4 GB, once)" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q torch numpy transformers
  fi
fi
"$python" -c "import sys, torch; sys.exit(0 if int(torch.__version__.split('.')[0]) >= 2 else 1)" ||
  die "$python has torch $("$python" -c 'import torch; print(torch.__version__)'): PyTorch 2 is needed"

cmake -S "$root" -B "$build" -DSHARDFT_BUILD_PERF=ON -DSHARDFT_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target shardft -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
shardft=$build/shardft
[[ -x $shardft ]] || die "no shardft binary at $shardft"

pin=()
if [[ -n "$cpu" ]] && command -v taskset >/dev/null 2>&1; then pin=(taskset -c "$cpu"); fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
rm -rf "$work"; mkdir -p "$work"
echo "cpu_vs_torch.sh: load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown); ${rounds} rounds of ${cases[*]}" >&2

for case in "${cases[@]}"; do
  python3 "$root/perf/cpu_vs_torch.py" recipe "${case%-*}" "$work/$case" $((warmup + steps)) "${case#*-}"
done
for round in $(seq 1 "$rounds"); do
  for case in "${cases[@]}"; do
    shape=${case%-*} dtype=${case#*-} d=$work/$case
    rm -rf "$d/run"
    "${pin[@]}" "$shardft" train --config "$d/recipe.yaml" >"$d/shardft-$round.log" 2>&1 ||
      die "shardft failed on $case (log: $d/shardft-$round.log)"
    cp "$d/run/metrics.jsonl" "$d/metrics-$round.jsonl"
    for mode in eager compile; do
      flag=(); [[ $mode == compile ]] && flag+=(--compile)
      [[ $dtype == bf16 ]] && flag+=(--bf16)
      "${pin[@]}" "$python" "$root/perf/torch_step.py" --shape "$shape" --attn sdpa "${flag[@]}" --threads 1 \
        --steps "$steps" --warmup "$warmup" >"$d/torch-$mode-$round.json" 2>"$d/torch-$mode-$round.log" ||
        die "torch ($mode) failed on $case (log: $d/torch-$mode-$round.log)"
    done
    echo "cpu_vs_torch.sh: round $round, $case done" >&2
  done
done
python3 "$root/perf/cpu_vs_torch.py" report "$work" "$results/cpu_vs_torch.json" "$warmup" "${cases[@]}"
if [[ "${PERF_SAVE_BASELINE:-0}" == 1 ]]; then
  cp "$results/cpu_vs_torch.json" "$root/perf/baselines/cpu-2core-vs-torch.json"
  echo "cpu_vs_torch.sh: saved as perf/baselines/cpu-2core-vs-torch.json" >&2
fi
