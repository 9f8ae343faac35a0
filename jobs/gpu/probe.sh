#!/usr/bin/env bash
# Measures shardft on a lent GPU machine from the prebuilt kit of `jobs/gpu/pack.sh --prebuilt`, in ONE
# device call that compiles nothing: the machine's minutes go to measuring. (jobs/gpu/validate.sh, which
# builds there from the source kit, is the fallback when binaries built here do not run there.)
#
#   jobs/gpu/probe.sh [--no-gpu] [--kit DIR] [--out DIR] [STAGE ...]
#
# The device command, with carry [".gpu-kit"] and timeout_s 540 (the stages end within PROBE_BUDGET_S):
#   bash jobs/gpu/probe.sh --out $OUT
# The kit must be the .gpu-kit/ of the checkout that the device call copies (it is git-ignored, hence the
# carry); the scripts, recipes and test fixtures come from that checkout's tree. Nothing is compiled.
#
# Stages (default: all, in this order; each under its own cap, trimmed to what is left of the budget;
# a failed, stopped or skipped stage never stops the next):
#   setup    unpack the kit into .cache/gpu-probe-<mode>/prefix (seconds); link the machine's cuBLAS,
#            cuBLASLt and NCCL into it (torch venv's site-packages/nvidia/*/lib first, then the CUDA
#            toolkit); ldd every ELF file ("not found" fails); versions: GPU, driver, memory, CUDA, cuDNN,
#            NCCL, torch; glibc / libstdc++ against the kit's needs; Open MPI from the prefix (`mpirun -np 1`
#            and a singleton start of shardft)                                                   cap 90 s
#   bench    the 1B step: validate_util.py's llama-1b recipe (hidden 2048, 16 layers, 32/8 heads, inter
#            8192, vocab 128256, 2 x 2048 tokens, bf16), unfenced; median ms/step of BENCH_STEPS (10)
#            after 2 warm-up steps, tokens/s, MFU vs 989 TFLOP/s, peak memory (nvidia-smi)     cap 150 s
#   torch    the same step in PyTorch (jobs/gpu/torch_bench.py from TORCH_PYTHON, default
#            /opt/torch/.venv/bin/python3): ms/step, peak memory                                  cap 120 s
#   kernels  the same shape at PROBE_KERNEL_LAYERS (4) layers, 4 steps, SHARDFT_KERNEL_TIMES=1: kernels by
#            time after step 1 (a GPU build times them by CUDA events, unfenced); PROBE_KERNEL_SHAPE adds
#            the bench's variant keys (overlap=0: each kernel's time without the optimizer beside it) cap 90 s
#   test     shardft_unit_tests with gtest XML: passed / failed / skipped, failures by name     cap 150 s
#   ncu      (only when named) the elementwise kernels under Nsight Compute: results/ncu.csv   cap 120 s
#   overlap  (only when named) the bench step with optimizer_overlap: false (bench runs the default, auto:
#            on a GPU the optimizer step on a second stream under the next forward): ms/step beside bench's,
#            and whether every step's loss equals bench's bit for bit (the same arithmetic)     cap 150 s
#   nondet   (only when named) the bench step with deterministic_attention: false (cuDNN's backward with
#            atomic dq): ms/step beside bench's; its losses may differ from bench's in low bits  cap 150 s
#   sms, sms2 (only when named) the bench step with optimizer_overlap_sms PROBE_OVERLAP_SMS (16), and
#            PROBE_OVERLAP_SMS2 (32): SMs the next forward's GEMMs leave to the overlapped optimizer step;
#            ms/step beside bench's (losses may differ in low bits: GEMMs for fewer SMs)       cap 150 s each
#   chunk    (only when named) the bench step with logits_chunk_tokens PROBE_LOGITS_CHUNK (auto: the run
#            decides, 4096 on an H100/H200; bench runs 2048): ms/step beside bench's           cap 150 s
#   lora, torch_lora (only when named) the bench shape fine-tuned with LoRA as trl does it (r
#            PROBE_LORA_R 16, alpha 2r, lora_dropout PROBE_LORA_DROPOUT 0.05, every linear layer; the
#            base frozen in bf16): shardft's step, and PyTorch's through PEFT (or torch_bench.py's own
#            LoRA layer where PEFT is not importable)                                   cap 150 s, 120 s
#   train    the default recipe on one GPU, PROBE_TRAIN_EPOCHS (3) of its 8 epochs: held-out exact
#            match >= 0.90 (3 epochs reach 1.0 on the CPU build)                                  cap 90 s
# then, whatever happened, in --out ($OUT when set, else .cache/gpu-probe-<mode>/out):
#   probe.md (for people), probe.json (everything), gpu-<card>.json (the record that
#   jobs/gpu/record_baseline.py commits as perf/baselines/gpu-<card>.json; card h100, h200, ...),
#   probe-logs.tar.xz (every log and result, the kit's MANIFEST).
#
# --no-gpu  the same path on a machine without a GPU (the check of a kit before carrying it): a driver
#           stub (the toolkit's stubs/libcuda.so) lets the binaries load; the unit tests are listed and
#           their start shows what Kokkos does without a device (Kokkos::initialize throws
#           cudaErrorStubLibrary from cudaGetDeviceCount: shardft reports it and exits 1, the test binary
#           aborts); bench, kernels and train are skipped (no GPU); PyTorch runs a tiny shape on the CPU
#           where importable. A skipped stage says why.
# Environment: PROBE_BUDGET_S (450: all stages; the report needs a few seconds more), PROBE_CAP_<STAGE>
# (seconds, e.g. PROBE_CAP_TEST=200), BENCH_STEPS, PROBE_TRAIN_EPOCHS, TORCH_PYTHON, UNIT_TEST_FILTER (a
# --gtest_filter), PEAK_TFLOPS (989, H100 SXM / H200 dense bf16).
# Exit: 0 when every stage passed or was skipped for a stated reason, 1 when one failed, 2 on bad input.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "jobs/gpu/probe.sh: $*" >&2; exit 2; }
t_start=$(date +%s)

mode=gpu
kit=$root/.gpu-kit
out=${OUT:-}
stages=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-gpu) mode=nogpu ;;
    --kit) [ $# -ge 2 ] || die "--kit needs a folder"; kit=$2; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    setup|bench|torch|kernels|test|train|ncu|overlap|nondet|sms|sms2|chunk|lora|torch_lora) stages+=("$1") ;;
    *) die "unknown argument '$1' (expected --no-gpu, --kit DIR, --out DIR or stages: setup bench torch kernels test train ncu overlap nondet sms sms2 chunk lora torch_lora)" ;;
  esac
  shift
done
[ ${#stages[@]} -gt 0 ] || stages=(setup bench torch kernels test train)
[ -d "$kit" ] || die "no kit folder at $kit (make one here with jobs/gpu/pack.sh --prebuilt and carry it)"
kit=$(cd "$kit" && pwd)
if [ ! -f "$kit/shardft-kit.tar.xz" ]; then
  [ -d "$kit/debs" ] && die "$kit is a source kit: jobs/gpu/validate.sh builds from it; pack a prebuilt one with jobs/gpu/pack.sh --prebuilt"
  die "$kit has no shardft-kit.tar.xz (pack it with jobs/gpu/pack.sh --prebuilt)"
fi
budget=${PROBE_BUDGET_S:-450}
[[ $budget =~ ^[0-9]+$ ]] || die "PROBE_BUDGET_S=$budget: expected seconds"
state=$root/.cache/gpu-probe-$mode
prefix=$state/prefix
out=${out:-$state/out}
rm -rf "$state/results" "$state/logs"
mkdir -p "$state/results" "$state/logs" "$out"
out=$(cd "$out" && pwd)
util=$root/jobs/gpu/probe_util.py
vutil=$root/jobs/gpu/validate_util.py
command -v python3 >/dev/null || die "python3 not found (the report needs it)"
torch_py=${TORCH_PYTHON:-}
if [ -z "$torch_py" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then torch_py=/opt/torch/.venv/bin/python3; else torch_py=$(command -v python3); fi
fi
peak=${PEAK_TFLOPS:-989}
echo "probe: $mode mode, kit $kit, budget ${budget} s, report into $out"

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
result() { python3 "$util" result "$state/results/$1.json" "${@:2}"; }
# cap STAGE DEFAULT MIN: the stage's cap (PROBE_CAP_<STAGE> or DEFAULT), trimmed to the budget left less
# 10 s for the report; fails (prints nothing) when less than MIN is left.
cap() {
  local var=PROBE_CAP_${1^^} left
  left=$((budget - ($(date +%s) - t_start) - 10))
  local c=${!var:-$2}
  [ "$c" -le "$left" ] || c=$left
  [ "$c" -ge "$3" ] || return 1
  echo "$c"
}
# capped SECONDS LOG COMMAND...: run under timeout (TERM to the process group, KILL 10 s later); then any
# process still running one of the kit's binaries (mpirun's children outlive a KILLed mpirun) is
# killed by its id. Returns the command's status (124 / 137: stopped at the cap).
capped() {
  local secs=$1 log=$2 rc=0
  shift 2
  ( timeout -k 10 "$secs" "$@"; exit $? ) >> "$log" 2>&1 || rc=$?  # not exec'd: the report of a killed child goes to the log
  reap
  return "$rc"
}
reap() {
  local d exe
  for d in /proc/[0-9]*; do
    exe=$(readlink "$d/exe" 2>/dev/null) || continue
    case "$exe" in "$prefix"/*)
      if kill -KILL "${d#/proc/}" 2>/dev/null; then echo "probe: killed leftover ${d#/proc/} ($exe)"; fi ;;
    esac
  done
}
# GPU memory: one sample before, then every 200 ms while the command runs.
sampler=""
sample_start() {
  [ "$mode" = gpu ] && command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 > "$1/before_mib.txt" 2>/dev/null || true
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 > "$1/gpu_memory_mib.txt" 2>/dev/null &
  sampler=$!
}
sample_stop() {
  [ -n "$sampler" ] || return 0
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  sampler=""
}

# The kit's Open MPI and PMIx, relocated into the prefix (their compiled-in folders are Debian's /usr).
kit_env() {
  local pmix=$prefix/usr/lib/x86_64-linux-gnu/pmix2
  export OPAL_PREFIX=$prefix/usr OPAL_SYSCONFDIR=$prefix/etc/openmpi PMIX_PREFIX=$pmix PMIX_LIBDIR=$pmix/lib \
    PMIX_PKGLIBDIR=$pmix/lib/pmix PMIX_DATADIR=$pmix/share PMIX_PKGDATADIR=$pmix/share/pmix
  export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive SHARDFT_KERNEL_TIMES=${SHARDFT_KERNEL_TIMES:-0}
}
# One rank of the kit's shardft under the kit's mpirun: "${mpirun1[@]}" train ...
mpirun1=("$prefix/usr/bin/mpirun" -np 1 --bind-to none -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x OMP_WAIT_POLICY
         -x SHARDFT_KERNEL_TIMES "$prefix/bin/shardft")
have_prefix() { [ -x "$prefix/bin/shardft" ] && [ -f "$state/results/setup.json" ]; }
gpu_ready() { [ "$mode" = gpu ] && [ -f "$state/gpu_ok" ]; }
no_gpu_reason() {
  if [ "$mode" = nogpu ]; then echo "no GPU (--no-gpu): the CUDA build needs a device to start Kokkos"
  else echo "no usable GPU (the setup stage found none: see its note)"; fi
}

# ---- setup -------------------------------------------------------------------------------------
stage_setup() {
  local c t0 problems=() log=$state/logs/setup.log
  c=$(cap setup 90 20) || { result setup failed 0 reason="no time left in the budget"; return 1; }
  t0=$(now)
  rm -rf "$prefix" "$state/unpack"
  mkdir -p "$state/unpack"
  if command -v xz >/dev/null; then
    timeout "$c" tar -xJf "$kit/shardft-kit.tar.xz" -C "$state/unpack"
  else  # no xz-utils: Python's tarfile reads xz itself
    timeout "$c" python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$kit/shardft-kit.tar.xz" "$state/unpack"
  fi
  mv "$state/unpack/shardft-kit" "$prefix"
  rmdir "$state/unpack"
  echo "probe: unpacked $(du -sm "$prefix" | cut -f1) MiB into $prefix in $(since "$t0") s" | tee -a "$log"

  # The binaries name the source tree they were built in (tests read fixtures from it): where that
  # path does not exist here, it becomes a link to this tree.
  local src; src=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1])).get('source_dir', ''))" "$prefix/kit.json")
  if [ -n "$src" ] && [ "$src" != "$root" ] && [ ! -e "$src" ]; then
    mkdir -p "$(dirname "$src")" && ln -s "$root" "$src" && echo "probe: linked $src -> $root (the build's source folder)" | tee -a "$log"
  fi

  # cuBLAS, cuBLASLt, NCCL (cuDNN): the machine's, linked into prefix/lib/cuda, which every binary's RPATH names.
  local sonames so found d roots=() venv
  sonames=$(python3 -c "import json, sys; print(' '.join(h['soname'] for h in json.load(open(sys.argv[1]))['cuda_from_gpu_machine']))" "$prefix/kit.json")
  venv=$(dirname "$(dirname "$torch_py")")
  for d in "$venv"/lib/python3*/site-packages/nvidia "${CUDA_HOME:-/usr/local/cuda}" /usr/local/cuda /usr/lib/x86_64-linux-gnu /usr/local/lib; do
    [ -d "$d" ] && roots+=("$d")
  done
  for so in $sonames; do
    found=""
    for d in "${roots[@]}"; do
      found=$(find -L "$d" -maxdepth 4 -name "$so" \( -type f -o -type l \) 2>/dev/null | sort | head -n 1)
      [ -z "$found" ] || break
    done
    if [ -n "$found" ]; then
      ln -sfn "$(readlink -f "$found")" "$prefix/lib/cuda/$so"
      echo "probe: $so <- $(readlink -f "$found")" | tee -a "$log"
      # cuDNN dlopens its engine libraries and NVRTC its builtins by name, found through $ORIGIN of the
      # link's folder: they are linked beside it.
      case "$so" in
        libcudnn*|libnvrtc*)
          local sib
          for sib in "$(dirname "$(readlink -f "$found")")"/"${so%%.so*}"*.so*; do
            [ -e "$sib" ] && [ ! -e "$prefix/lib/cuda/$(basename "$sib")" ] && ln -sfn "$(readlink -f "$sib")" "$prefix/lib/cuda/$(basename "$sib")"
          done ;;
      esac
    else
      problems+=("$so not found on this machine (looked in ${roots[*]})")
    fi
  done
  # Without a driver (--no-gpu) the toolkit's stub libcuda.so.1 lets the binaries load; its every call
  # fails with CUDA_ERROR_STUB_LIBRARY.
  if [ "$mode" = nogpu ] && ! grep -q 'libcuda\.so\.1 ' <<<"$(ldconfig -p 2>/dev/null)"; then
    local stub; stub=$(find /usr/local/cuda*/lib64/stubs /usr/local/cuda*/targets/*/lib/stubs -name libcuda.so 2>/dev/null | head -n 1 || true)
    if [ -n "$stub" ]; then ln -sfn "$stub" "$prefix/lib/cuda/libcuda.so.1"; echo "probe: no driver: stub $stub as libcuda.so.1" | tee -a "$log"
    else problems+=("no CUDA driver and no toolkit stub libcuda.so: the binaries cannot load"); fi
  fi

  # Every ELF file of the prefix, as the loader resolves it here (in parallel: one block per file).
  local n
  : > "$state/logs/ldd.txt"
  # shellcheck disable=SC2016  # the script for bash -c
  find "$prefix" -type f -print0 | xargs -0 -r -n 16 -P "$(nproc)" bash -c '
    for f in "${@:2}"; do
      magic=""; IFS= read -r -n 4 magic < "$f" 2>/dev/null || true
      [ "$magic" = $'"'"'\x7fELF'"'"' ] || continue
      out=$(ldd "$f" 2>&1 | sed "s/^/   /"); printf "== %s\n%s\n" "${f#"$0"/}" "$out" >> "$1"
    done' "$prefix" "$state/logs/ldd.txt"
  n=$(grep -c '^== ' "$state/logs/ldd.txt" || true)
  local missing; missing=$(grep -c 'not found' "$state/logs/ldd.txt" || true)
  [ "$missing" = 0 ] || problems+=("ldd: $missing unresolved libraries (logs/ldd.txt)")
  echo "probe: ldd of $n ELF files: $missing unresolved (at $(since "$t0") s)" | tee -a "$log"

  timeout 150 python3 "$util" versions "$state/results/versions.json" "$prefix" "$torch_py" "$state/logs/ldd.txt" \
    || problems+=("could not collect the versions")
  local abi; abi=$(python3 -c "import json, sys; print('; '.join(json.load(open(sys.argv[1])).get('abi_problems', [])))" "$state/results/versions.json" 2>/dev/null || true)
  [ -z "$abi" ] || problems+=("$abi")
  echo "probe: versions collected (at $(since "$t0") s)" | tee -a "$log"
  if [ "$mode" = gpu ]; then
    if command -v nvidia-smi >/dev/null && grep -q '^GPU 0' <<<"$(nvidia-smi -L 2>/dev/null)"; then touch "$state/gpu_ok"
    else rm -f "$state/gpu_ok"; problems+=("nvidia-smi lists no GPU"); fi
  fi

  # Open MPI from the prefix: its folders, one rank of a host command, and shardft's singleton start
  # (MPI_Init forks the kit's orted, then Kokkos starts; the missing recipe then ends it with exit 2).
  kit_env
  local mpi_prefix rc=0
  mpi_prefix=$("$prefix/usr/bin/ompi_info" --path prefix --parsable 2>&1 || true)
  case "$mpi_prefix" in *"$prefix/usr"*) ;; *) problems+=("the kit's Open MPI is not relocated: ompi_info says $mpi_prefix") ;; esac
  capped 30 "$state/logs/mpirun_true.log" "$prefix/usr/bin/mpirun" -np 1 --bind-to none true \
    || { rc=$?; problems+=("mpirun -np 1 true failed (exit $rc): $(tail -n 3 "$state/logs/mpirun_true.log" | tr '\n' ' ' | cut -c1-300)"); }
  local start_rc=0 start_log=$state/logs/singleton.log
  capped 60 "$start_log" "$prefix/bin/shardft" train --config "$state/no-such-recipe.yaml" || start_rc=$?
  local start_msg; start_msg=$(grep -m1 -E 'error|what\(\)' "$start_log" || tail -n 1 "$start_log")
  start_msg=$(cut -c1-400 <<<"$start_msg")
  echo "probe: Open MPI checked, shardft started as a singleton: exit $start_rc: $start_msg (at $(since "$t0") s)" | tee -a "$log"
  if [ "$mode" = gpu ] && ! grep -q "no-such-recipe" "$start_log"; then
    problems+=("shardft did not reach its recipe (exit $start_rc): $start_msg")
  fi
  local status=ok
  [ ${#problems[@]} -eq 0 ] || status=failed
  local joined; joined=$(printf '%s; ' "${problems[@]}")
  result setup "$status" "$(since "$t0")" cap_s="$c" elf_files="$n" ldd_unresolved="$missing" \
    singleton_exit="$start_rc" singleton_says="$start_msg" ${problems:+reason="${joined%; }"}
  [ "$status" = ok ]
}

# ---- bench: the 1B step, unfenced --------------------------------------------------------------
bench_shape() {  # NAME LAYERS STEPS WARMUP
  echo "name=$1 hidden=2048 layers=$2 heads=32 kv_heads=8 inter=8192 vocab=128256 seq=2048 batch=2 steps=$3 warmup=$4 rope_theta=500000"
}
stage_bench() { run_bench bench ""; }
stage_overlap() { run_bench overlap "overlap=0"; }
stage_nondet() { run_bench nondet "nondet=1"; }
stage_sms() { run_bench sms "overlap_sms=${PROBE_OVERLAP_SMS:-16}"; }
stage_sms2() { run_bench sms2 "overlap_sms=${PROBE_OVERLAP_SMS2:-32}"; }
stage_chunk() { run_bench chunk "logits_chunk=${PROBE_LOGITS_CHUNK:-auto}"; }
lora_shape() { echo "lora_r=${PROBE_LORA_R:-16} lora_dropout=${PROBE_LORA_DROPOUT:-0.05}"; }
stage_lora() { run_bench lora "$(lora_shape)"; }
run_bench() {  # STAGE EXTRA_SHAPE_ARG
  local stage=$1
  have_prefix || { result "$stage" skipped 0 reason="no kit prefix (setup did not unpack it)"; return 0; }
  gpu_ready || { result "$stage" skipped 0 reason="$(no_gpu_reason)"; return 0; }
  local c; c=$(cap "$stage" 150 45) || { result "$stage" skipped 0 reason="out of budget: under 45 s left"; return 0; }
  local shape_args; read -ra shape_args <<<"$(bench_shape llama-1b 16 "${BENCH_STEPS:-10}" 2) $2"
  local dir=$state/$stage log=$state/logs/${stage}_shardft.log t0 rc=0
  rm -rf "$dir"; mkdir -p "$dir"
  python3 "$vutil" bench-recipe "$dir" "$peak" "${shape_args[@]}"
  kit_env
  echo "probe: $stage (cap $c s; log $log)"
  t0=$(now)
  sample_start "$dir"
  (cd "$root" && capped "$c" "$log" "${mpirun1[@]}" train --config "$dir/recipe.yaml") || rc=$?
  sample_stop
  python3 "$util" bench-result "$dir" "$log" "$state/results/$stage.json" "$(since "$t0")" "$rc" "$c" "$peak" "${shape_args[@]}"
  rm -rf "$dir/run"  # the closing model.safetensors of a 1B model: 5 GB
}

# ---- torch: the same step in PyTorch -----------------------------------------------------------
stage_torch() { run_torch torch ""; }
stage_torch_lora() { run_torch torch_lora "$(lora_shape)"; }
run_torch() {  # STAGE EXTRA_SHAPE_ARGS
  local stage=$1 probe device=cuda shape
  if ! probe=$(timeout 120 "$torch_py" -c "import torch, transformers; print(torch.__version__, torch.cuda.is_available())" 2>&1); then
    result "$stage" skipped 0 reason="torch and transformers are not importable by $torch_py ($(tail -n 1 <<<"$probe" | cut -c1-200)); set TORCH_PYTHON"
    return 0
  fi
  case "$probe" in *False) device=cpu ;; esac
  if [ "$mode" = gpu ] && [ "$device" = cpu ]; then result "$stage" failed 0 reason="torch ($probe) sees no CUDA device"; return 1; fi
  if [ "$device" = cuda ]; then shape=$(bench_shape llama-1b 16 "${BENCH_STEPS:-10}" 2)
  else shape="name=tiny hidden=128 layers=2 heads=4 kv_heads=2 inter=384 vocab=1024 seq=128 batch=2 steps=3 warmup=1 rope_theta=10000"; fi
  local c; c=$(cap "$stage" 120 40) || { result "$stage" skipped 0 reason="out of budget: under 40 s left"; return 0; }
  local shape_args; read -ra shape_args <<<"$shape $2"
  local dir=$state/$stage log=$state/logs/bench_$stage.log t0 rc=0
  rm -rf "$dir"; mkdir -p "$dir"
  echo "probe: $stage on $device (cap $c s; log $log)"
  t0=$(now)
  sample_start "$dir"
  timeout -k 10 "$c" "$torch_py" "$root/jobs/gpu/torch_bench.py" --device "$device" --peak-tflops "$peak" "${shape_args[@]}" \
    > "$dir/raw.json" 2> "$log" || rc=$?
  sample_stop
  python3 "$util" torch-result "$dir/raw.json" "$log" "$state/results/$stage.json" "$(since "$t0")" "$rc" "$c" "$dir"
}

# ---- kernels: shares at PROBE_KERNEL_LAYERS (4) layers ------------------------------------------------------
stage_kernels() {
  have_prefix || { result kernels skipped 0 reason="no kit prefix (setup did not unpack it)"; return 0; }
  gpu_ready || { result kernels skipped 0 reason="$(no_gpu_reason)"; return 0; }
  local c; c=$(cap kernels 90 30) || { result kernels skipped 0 reason="out of budget: under 30 s left"; return 0; }
  local layers=${PROBE_KERNEL_LAYERS:-4}
  local shape_args; read -ra shape_args <<<"$(bench_shape profile "$layers" 4 0) ${PROBE_KERNEL_SHAPE:-}"
  local dir=$state/kernels log=$state/logs/kernel_profile.log t0 rc=0
  rm -rf "$dir"; mkdir -p "$dir"
  python3 "$vutil" bench-recipe "$dir" "$peak" "${shape_args[@]}"
  kit_env
  echo "probe: kernels (cap $c s; log $log)"
  t0=$(now)
  (cd "$root" && SHARDFT_KERNEL_TIMES=1 capped "$c" "$log" "${mpirun1[@]}" train --config "$dir/recipe.yaml") || rc=$?
  python3 "$util" kernels "$log" "$state/results/kernels.json" "$(since "$t0")" "$rc" "$c" "$layers" "${PROBE_KERNEL_SHAPE:-}"
  rm -rf "$dir/run"
}

# ---- ncu: the elementwise kernels under Nsight Compute (named stage only) ----------------------------
# One decoder layer of the 1B shape (every kernel has the 16-layer shapes), 2 steps, the kernels whose
# demangled names match PROBE_NCU_KERNELS profiled once each (kernel replay) with the speed-of-light,
# occupancy and launch sections: DRAM throughput, achieved occupancy, registers and block size.
stage_ncu() {
  have_prefix || { result ncu skipped 0 reason="no kit prefix (setup did not unpack it)"; return 0; }
  gpu_ready || { result ncu skipped 0 reason="$(no_gpu_reason)"; return 0; }
  local ncu_bin; ncu_bin=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1 || true)
  [ -n "$ncu_bin" ] || { result ncu skipped 0 reason="no ncu on this machine"; return 0; }
  local c; c=$(cap ncu 120 40) || { result ncu skipped 0 reason="out of budget: under 40 s left"; return 0; }
  local shape_args; read -ra shape_args <<<"$(bench_shape ncu 1 2 0)"
  local dir=$state/ncu log=$state/logs/ncu.log csv=$state/results/ncu.csv t0 rc=0
  # The lambdas' enclosing functions, as the demangled names carry them (not the Kokkos labels; and no
  # bare "rope": every kernel's policy type names ImplWorkItemProperty).
  local kernels=${PROBE_NCU_KERNELS:-forward_packs|backward_packs|_warp_rows|_held_rows|rope_rotate|forward_backward_rows|sum_squares|ColumnSlices}
  rm -rf "$dir"; mkdir -p "$dir"
  python3 "$vutil" bench-recipe "$dir" "$peak" "${shape_args[@]}"
  kit_env
  echo "probe: ncu $ncu_bin (cap $c s; log $log)"
  t0=$(now)
  (cd "$root" && capped "$c" "$log" "$ncu_bin" --clock-control none --kernel-name-base demangled \
     -k "regex:$kernels" -c "${PROBE_NCU_COUNT:-20}" --section SpeedOfLight --section Occupancy --section LaunchStats \
     --csv --page details --log-file "$state/logs/ncu_tool.log" "$prefix/bin/shardft" train --config "$dir/recipe.yaml") || rc=$?
  grep '^"' "$state/logs/ncu_tool.log" > "$csv" 2>/dev/null || true  # --log-file takes the report too
  local rows; rows=$(wc -l < "$csv")
  if [ "$rows" -gt 1 ]; then result ncu ok "$(since "$t0")" cap_s="$c" exit="$rc" csv_rows="$rows"
  else result ncu failed "$(since "$t0")" cap_s="$c" exit="$rc" reason="no ncu rows (see logs/ncu.log, logs/ncu_tool.log)"; fi
  rm -rf "$dir/run"
}

# ---- test: the unit tests ----------------------------------------------------------------------
stage_test() {
  have_prefix || { result test skipped 0 reason="no kit prefix (setup did not unpack it)"; return 0; }
  local c; c=$(cap test 150 40) || { result test skipped 0 reason="out of budget: under 40 s left"; return 0; }
  [ "$mode" = nogpu ] && c=$((c < 60 ? c : 60))
  kit_env
  local bin=$prefix/bin/shardft_unit_tests log=$state/logs/unit_tests.log xml=$state/results/unit_tests.xml
  local cwd=$state/test-cwd t0 rc=0 listed=0
  rm -rf "$cwd" "$xml"; mkdir -p "$cwd"
  local filter=(); [ -n "${UNIT_TEST_FILTER:-}" ] && filter=("--gtest_filter=$UNIT_TEST_FILTER")
  listed=$(timeout 60 "$bin" --gtest_list_tests "${filter[@]}" 2>/dev/null | grep -c '^  ' || true)
  echo "probe: unit tests, $listed listed (cap $c s; log $log)"
  t0=$(now)
  (cd "$cwd" && capped "$c" "$log" "$bin" "${filter[@]}" --gtest_output="xml:$xml") || rc=$?
  python3 "$util" gtest "$xml" "$log" "$state/results/test.json" "$(since "$t0")" "$rc" "$c" "$mode" "$listed"
}

# ---- train: the default recipe, shortened ------------------------------------------------------
stage_train() {
  have_prefix || { result train skipped 0 reason="no kit prefix (setup did not unpack it)"; return 0; }
  gpu_ready || { result train skipped 0 reason="$(no_gpu_reason)"; return 0; }
  local c; c=$(cap train 90 30) || { result train skipped 0 reason="out of budget: under 30 s left"; return 0; }
  local epochs=${PROBE_TRAIN_EPOCHS:-3} run=$state/runs/default log=$state/logs/train_default.log t0 rc=0
  rm -rf "$run"
  kit_env
  echo "probe: default recipe, $epochs epochs (cap $c s; log $log)"
  t0=$(now)
  (cd "$root" && capped "$c" "$log" "${mpirun1[@]}" train --config jobs/recipes/default.yaml --num_train_epochs "$epochs" \
     --output_dir "$run") || rc=$?
  python3 "$util" train "$run/metrics.jsonl" "$log" "$state/results/train.json" "$(since "$t0")" "$rc" "$c" "$epochs"
}

# ---- run the stages, then the report ------------------------------------------------------------
# Each stage runs in a subshell outside any condition, so that `set -e` holds inside it; a stage that
# ends without writing its result gets one that says so.
for s in "${stages[@]}"; do
  echo "probe: --- $s ($(( $(date +%s) - t_start )) s of $budget)"
  set +e
  ( set -e; trap sample_stop EXIT; "stage_$s" )
  rc=$?
  set -e
  sample_stop
  if [ ! -f "$state/results/$s.json" ]; then
    result "$s" failed 0 reason="the stage's script stopped (exit $rc) before writing its result: see logs/"
  fi
done
python3 "$util" report "$state" "$out" "$mode" "$budget" || echo "probe: the report failed" >&2
cp "$prefix/MANIFEST.txt" "$state/logs/kit-MANIFEST.txt" 2>/dev/null || true
tar -C "$state" -cJf "$out/probe-logs.tar.xz" logs results 2>/dev/null || echo "probe: could not pack the logs" >&2
statuses=$(python3 -c "import json, sys; print(' '.join(f'{k}={v}' for k, v in json.load(open(sys.argv[1]))['summary']['statuses'].items()))" "$out/probe.json" 2>/dev/null || echo "report=missing")
echo "probe: $statuses ($(( $(date +%s) - t_start )) s); report $out/probe.md"
case " $statuses " in *=failed*|*report=missing*) exit 1 ;; esac
