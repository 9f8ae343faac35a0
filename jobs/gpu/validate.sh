#!/usr/bin/env bash
# Validates a GPU build from the offline kit of jobs/gpu/pack.sh, on a machine with no network and
# none of shardft's dependencies: unpack the kit into a private prefix, build Kokkos (CUDA) and
# shardft against it, run the unit tests, the default recipe on one GPU, a bf16 training benchmark of
# a ~1B-parameter Llama at sequence 2048, and the same step through PyTorch; one report.
#
#   jobs/gpu/validate.sh [--no-gpu] [--kit DIR] [--out DIR] [STAGE ...]
#
# STAGE: unpack, build, test, train, bench, torch (default: all, in that order); `report` only
# rewrites the report. Each stage leaves a stamp and is skipped when done (build: for the same
# sources; --force redoes them), so a machine that allows 10 minutes a command runs
#   validate.sh unpack build; validate.sh build; validate.sh test train; validate.sh bench torch
# and each call leaves the report so far in the output folder. A failed stage is reported and the
# next ones still run where they can; the exit status is 1 when any stage failed, 2 when one found
# something it needs missing.
#
# --no-gpu  the same path on a machine without a GPU (the CPU check of the kit): Kokkos with OpenMP
#           (no CUDA, so the GPU tests are not compiled), 2 ranks for the default recipe, a small
#           benchmark shape, PyTorch only where importable. The build is kept from the system's
#           packages: CMake ignores /usr (CMAKE_SYSTEM_IGNORE_PREFIX_PATH).
# Both: every binary gets the kit's library folders as its RPATH, and the build stage checks that
# CMake's found paths, every header compiled and `ldd` of the binaries come from the kit.
# --kit DIR default .gpu-kit/ at the repository root (carry it to the GPU machine beside the tree)
# --out DIR where the report goes (default: $OUT when set, else .cache/gpu-validate-<mode>/out)
#
# Environment: BENCH_BATCH (sequences per step, default 2), BENCH_STEPS (timed steps after 2 warm-up
# steps; default 10, --no-gpu 4), PEAK_TFLOPS (MFU basis; default 989, the H100 SXM / H200 datasheet
# dense bf16; --no-gpu 0: shardft's measured CPU rate), TORCH_PYTHON (default
# /opt/torch/.venv/bin/python3 when present, else python3), NCCL_ROOT (NCCL's folder when it is not
# beside the CUDA toolkit or in /usr/local), JOBS (compile jobs; default all cores), UNIT_TEST_FILTER
# (a --gtest_filter for the unit tests).
# State (prefix, stamps, results, logs): .cache/gpu-validate-<cuda|nogpu>/; build: build-kit-<backend>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "jobs/gpu/validate.sh: $*" >&2; exit 2; }

mode=cuda
kit=$root/.gpu-kit
out=${OUT:-}
force=0
stages=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-gpu) mode=nogpu ;;
    --kit) [ $# -ge 2 ] || die "--kit needs a folder"; kit=$2; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out=$2; shift ;;
    --force) force=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    unpack|build|test|train|bench|torch|report) stages+=("$1") ;;
    all) stages+=(unpack build test train bench torch) ;;
    *) die "unknown argument '$1' (expected --no-gpu, --kit DIR, --out DIR, --force or a stage: unpack build test train bench torch report)" ;;
  esac
  shift
done
[ ${#stages[@]} -gt 0 ] || stages=(unpack build test train bench torch)
[ -d "$kit" ] || die "no kit folder at $kit (make one with jobs/gpu/pack.sh and carry it here)"
kit=$(cd "$kit" && pwd)
state=$root/.cache/gpu-validate-$mode
prefix=$state/prefix
out=${out:-$state/out}
mkdir -p "$state/stamps" "$state/results" "$state/logs" "$out"
out=$(cd "$out" && pwd)
helper=$root/jobs/gpu/validate_util.py
if [ "$mode" = cuda ]; then backend=cuda; else backend=openmp; fi
build=$root/build-kit-$backend
if [ "$mode" = cuda ]; then peak=${PEAK_TFLOPS:-989}; else peak=${PEAK_TFLOPS:-0}; fi
command -v python3 >/dev/null || die "python3 not found (the report and the data generator need it)"

stamp_ok() { [ "$force" = 0 ] && [ -f "$state/stamps/$1" ] && [ "$(cat "$state/stamps/$1")" = "$2" ]; }
# result STAGE STATUS SECONDS [key=value ...]: what the report shows for a stage.
result() { python3 "$helper" result "$state/results/$1.json" "${@:2}"; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }

# ---- the prefix's environment ------------------------------------------------------------------
# The kit's libraries reach only shardft's processes and the kit's own tools (through the wrappers in
# prefix/bin): a bookworm library on the host tools' path (CMake, nvcc, Python with torch) could
# shadow a newer one they need.
kit_libdirs() { cat "$prefix/libdirs"; }
# Open MPI derives its folders from OPAL_PREFIX; Debian's PMIx was configured with absolute ones, so
# each is named (its plugins and help texts), and /etc/openmpi is the kit's.
mpi_env() {
  local pmix=$prefix/usr/lib/x86_64-linux-gnu/pmix2
  echo "export OPAL_PREFIX='$prefix/usr' OPAL_SYSCONFDIR='$prefix/etc/openmpi' PMIX_PREFIX='$pmix'" \
       "PMIX_LIBDIR='$pmix/lib' PMIX_PKGLIBDIR='$pmix/lib/pmix' PMIX_DATADIR='$pmix/share' PMIX_PKGDATADIR='$pmix/share/pmix'"
}
kit_env() {
  eval "$(mpi_env)"
  export PKG_CONFIG_LIBDIR=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig
  export PATH=$prefix/bin:$PATH
  export OMPI_MCA_btl_base_warn_component_unused=0
  if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

# ---- unpack ------------------------------------------------------------------------------------
stage_unpack() {
  local manifest=$kit/MANIFEST.txt
  [ -f "$manifest" ] || die "$kit has no MANIFEST.txt: not a kit of jobs/gpu/pack.sh"
  ls "$kit"/debs/*.deb >/dev/null 2>&1 || die "$kit/debs has no .deb files"
  ls "$kit"/kokkos-*.tar.xz >/dev/null 2>&1 || die "$kit has no kokkos-*.tar.xz"
  local want; want="$(cksum < "$manifest") $(declare -f stage_unpack mpi_env | cksum)"
  if stamp_ok unpack "$want"; then echo "validate: kit already unpacked in $prefix"; return 0; fi
  local t0; t0=$(now)
  rm -rf "$prefix" "$state/kokkos-src"
  mkdir -p "$prefix/bin" "$state/kokkos-src"
  local f n=0
  for f in "$kit"/debs/*.deb; do
    # owners.tsv (file, package): the build check names the package each header and library came from.
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$f" "$prefix"
      dpkg-deb -c "$f" | awk -v p="$(dpkg-deb -f "$f" Package)" '{print $6 "\t" p}' >> "$prefix/owners.tsv"
    else  # no dpkg: a .deb is an ar archive around data.tar.*
      (cd "$state" && rm -rf deb-x && mkdir deb-x && cd deb-x && ar x "$f" && tar -xf data.tar.* -C "$prefix" \
         && tar -tf data.tar.* | awk -v p="$(basename "$f" | cut -d_ -f1)" '{print $0 "\t" p}' >> "$prefix/owners.tsv" \
         && cd .. && rm -rf deb-x) || die "cannot unpack $f: neither dpkg-deb nor ar + tar worked"
    fi
    n=$((n + 1))
  done
  tar -xJf "$kit"/kokkos-*.tar.xz -C "$state/kokkos-src" --strip-components=1

  # What dpkg's maintainer scripts and /usr would have given: absolute symlinks point into the
  # prefix, the alternatives (OpenBLAS's flavour, the .openmpi names) exist, and text files that name
  # /usr (pkg-config files, HDF5's compiler wrappers) name the prefix.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    ln -sfn "$prefix$target" "$link"
  done < <(find "$prefix" -type l -lname '/*' -print0)
  local arch=x86_64-linux-gnu
  for f in "$prefix/usr/lib/$arch/openblas-pthread"/lib*.so*; do
    ln -sfn "openblas-pthread/$(basename "$f")" "$prefix/usr/lib/$arch/$(basename "$f")"
  done
  for f in "$prefix/usr/include/$arch/openblas-pthread"/*.h; do
    ln -sfn "openblas-pthread/$(basename "$f")" "$prefix/usr/include/$arch/$(basename "$f")"
  done
  while IFS= read -r -d '' f; do
    sed -i -E "s#(^|[=[:space:]\"',:]|-I|-L)/usr(/|\$|[[:space:]\"'])#\\1$prefix/usr\\2#g" "$f"
  done < <(find "$prefix/usr/lib/$arch/pkgconfig" "$prefix/usr/share/pkgconfig" "$prefix/usr/lib/$arch/openblas-pthread/pkgconfig" \
             -name '*.pc' -print0; find "$prefix/usr/bin" -name 'h5*.openmpi' -print0)

  # Every folder holding a shared library: the RPATH of shardft's binaries and the wrappers' library path.
  find "$prefix" -name 'lib*.so*' \( -type f -o -type l \) ! -name 'mca_*' -printf '%h\n' | sort -u | paste -sd: > "$prefix/libdirs"

  # Debian's Open MPI libraries (and UCX's, ...) have a RUNPATH of /usr/lib/x86_64-linux-gnu/openmpi/lib,
  # which the loader searches instead of the executable's RPATH for their own dependencies: the
  # system's copy where there is one, nothing on the GPU machine. Theirs becomes the prefix's folders.
  local patchelf=$prefix/usr/bin/patchelf rp new
  [ -x "$patchelf" ] || die "the kit has no patchelf (re-run jobs/gpu/pack.sh)"
  while IFS= read -r -d '' f; do
    rp=$("$patchelf" --print-rpath "$f" 2>/dev/null) || continue  # not an ELF file
    case ":$rp" in *:/usr/*|*:/lib/*|*:/build/*) ;; *) continue ;; esac
    new=$(tr ':' '\n' <<<"$rp" | awk -v p="$prefix" '/^\/build\// {next} /^\/(usr|lib)\// {print p $0; next} {print}' | paste -sd:)
    "$patchelf" --set-rpath "${new:+$new:}$(kit_libdirs)" "$f" || die "patchelf could not set the RUNPATH of $f"
  done < <(find "$prefix" -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.py' -print0)

  # Wrappers: the kit's tools with the kit's environment. opal_wrapper picks its flags by the name it
  # is called by, so the MPI compilers are started under their .openmpi names. h5pcc links HDF5's
  # static archives unless told otherwise, and the kit has none (pack.sh takes them out).
  local tool real
  for tool in mpicc mpicxx mpirun mpiexec ompi_info h5pcc pkg-config; do
    case "$tool" in
      mpicc|mpicxx|mpirun|mpiexec|h5pcc) real=$prefix/usr/bin/$tool.openmpi ;;
      ompi_info) real=$prefix/usr/bin/ompi_info ;;
      pkg-config) real=$prefix/usr/bin/pkgconf ;;
    esac
    [ -e "$real" ] || die "the kit lacks $real (re-run jobs/gpu/pack.sh)"
    cat > "$prefix/bin/$tool" <<EOF
#!/usr/bin/env bash
$(mpi_env)
export PKG_CONFIG_LIBDIR='$prefix/usr/lib/$arch/pkgconfig:$prefix/usr/share/pkgconfig' HDF5_USE_SHLIB=yes
export LD_LIBRARY_PATH='$(cat "$prefix/libdirs")'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PATH='$prefix/bin:$prefix/usr/bin':\$PATH
exec '$real' "\$@"
EOF
    chmod +x "$prefix/bin/$tool"
  done
  ln -sfn pkg-config "$prefix/bin/pkgconf"
  kit_env
  local mpi_prefix; mpi_prefix=$("$prefix/bin/ompi_info" --path prefix 2>&1 || true)
  case "$mpi_prefix" in *"$prefix/usr"*) ;; *) die "the kit's Open MPI does not run from $prefix: ompi_info --path prefix said: $mpi_prefix" ;; esac
  echo "$want" > "$state/stamps/unpack"
  result unpack ok "$(since "$t0")" debs="$n" prefix="$prefix" \
    kit_bytes="$(du -sb "$kit" | cut -f1)" prefix_bytes="$(du -sb "$prefix" | cut -f1)" \
    kokkos="$(basename "$kit"/kokkos-*.tar.xz .tar.xz)" mpi="$("$prefix/bin/ompi_info" --version | head -n 1)"
  echo "validate: $n packages unpacked into $prefix"
}

# ---- build -------------------------------------------------------------------------------------
source_sum() {
  (cd "$root" && find CMakeLists.txt kernels comm io src tests perf jobs/gpu/build.sh jobs/gpu/patch_kokkos_cuda13.py -type f \
     \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name 'CMakeLists.txt' -o -name '*.cmake' -o -name '*.sh' -o -name '*.py' \) \
     -print0 | sort -z | xargs -0 cksum | cksum)
}
stage_build() {
  [ -f "$state/stamps/unpack" ] || die "the kit is not unpacked yet: run the unpack stage first"
  local want; want="$(source_sum) $(cat "$state/stamps/unpack")"
  if stamp_ok build "$want" && [ -x "$build/shardft" ]; then echo "validate: build up to date in $build"; return 0; fi
  kit_env
  local t0; t0=$(now)
  local arch=x86_64-linux-gnu
  local args=(
    "-DCMAKE_PREFIX_PATH=$prefix/usr"
    "-DMPI_C_COMPILER=$prefix/bin/mpicc" "-DMPI_CXX_COMPILER=$prefix/bin/mpicxx" "-DMPIEXEC_EXECUTABLE=$prefix/bin/mpirun"
    "-DHDF5_C_COMPILER_EXECUTABLE=$prefix/bin/h5pcc" "-DPKG_CONFIG_EXECUTABLE=$prefix/bin/pkg-config"
    "-DCBLAS_INCLUDE_DIR=$prefix/usr/include/$arch/openblas-pthread"
    -UHDF5_IS_PARALLEL  # FindHDF5 caches a FALSE from a failed configure and never looks again
  )
  local rpath; rpath=$(kit_libdirs)
  if [ "$backend" = openmp ]; then
    # Here the system has every package the kit has: /usr is out of CMake's search, so that one the
    # kit lacks fails the configure instead of being taken from the system. (Not on the GPU machine:
    # it has none of them, and its CUDA toolkit may live under /usr.)
    args+=("-DCMAKE_SYSTEM_IGNORE_PREFIX_PATH=/usr;/;/usr/local")
  else
    local nccl; nccl=$(find_nccl) || die "NCCL not found (no nccl.h + libnccl.so beside the CUDA toolkit, in /usr or /usr/local, or in a Python environment's nvidia/nccl); set NCCL_ROOT to a folder with include/nccl.h and lib/libnccl.so*"
    if [ -n "$nccl" ]; then
      args+=("-DNCCL_INCLUDE_DIR=${nccl%%|*}" "-DNCCL_LIBRARY=${nccl##*|}")
      rpath=$rpath:$(dirname "$(readlink -f "${nccl##*|}")")
    fi
  fi
  # DT_RPATH (not RUNPATH) covers the libraries' own dependencies too, and -rpath makes the linker find
  # those (libgfortran for OpenBLAS, libsz for HDF5, ...) in the kit. One word: build.sh splits
  # SHARDFT_CMAKE_ARGS at spaces.
  args+=("-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,$rpath")
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null; then export CMAKE_GENERATOR=Ninja; fi
  local opt=(); [ "$backend" = openmp ] && opt=(--openmp)
  local log=$state/logs/build.log
  echo "validate: building Kokkos ($backend) and shardft into $build (log: $log)"
  if SHARDFT_SKIP_INSTALL_DEPS=1 SHARDFT_GPU_BUILD_DIR=$build SHARDFT_GPU_TARGETS="shardft shardft_unit_tests" \
       SHARDFT_CMAKE_ARGS="${args[*]}" OMP_THREADS=2 \
       bash "$root/jobs/gpu/build.sh" "${opt[@]}" --no-test "$state/kokkos-src" > "$log" 2>&1; then
    local secs; secs=$(since "$t0")
    local check=$state/results/kit_check.json
    if python3 "$helper" kit-check "$prefix" "$build" "$root" "$state/kokkos-src" > "$check" 2> "$state/logs/kit_check.log"; then
      echo "$want" > "$state/stamps/build"
      result build ok "$secs" build_dir="$build" cmake="$(cmake --version | head -n 1)" \
        compiler="$(grep -m1 '^CMAKE_CXX_COMPILER:' "$build/CMakeCache.txt" | cut -d= -f2-)"
    else
      result build failed "$secs" reason="built, but the kit check found packages taken from outside the kit: $(tail -n 3 "$state/logs/kit_check.log" | tr '\n' ' ')"
      return 1
    fi
  else
    tail -n 40 "$log" >&2
    result build failed "$(since "$t0")" reason="jobs/gpu/build.sh failed: $(grep -m3 -E 'error|failed' "$log" | tr '\n' ' ' | cut -c1-400)"
    return 1
  fi
}

# NCCL is not in the kit (its library alone is 200 MB): the GPU machine's own, wherever it is. Prints
# nothing when CMake will find it by itself (beside the toolkit or in /usr/local), else
# "INCLUDE_DIR|LIBRARY"; a pip wheel's (torch's nvidia-nccl-cu*) has only libnccl.so.2, so the link
# name is made in the state folder.
find_nccl() {
  local cuda_root=""
  command -v nvcc >/dev/null && cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  local d
  if [ -z "${NCCL_ROOT:-}" ]; then
    for d in "$cuda_root" /usr/local; do
      if [ -n "$d" ] && [ -f "$d/include/nccl.h" ] && ls "$d"/lib*/libnccl.so >/dev/null 2>&1; then return 0; fi
    done
  fi
  local roots=()
  [ -n "${NCCL_ROOT:-}" ] && roots+=("$NCCL_ROOT")
  [ -n "${NCCL_ROOT:-}" ] || roots+=(/usr /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl* /usr/local/lib/python3*/dist-packages/nvidia/nccl*)
  for d in "${roots[@]}"; do
    local inc lib
    inc=$(find "$d" -maxdepth 3 -name nccl.h -path '*include*' 2>/dev/null | head -n 1)
    lib=$(find "$d" -maxdepth 3 -name 'libnccl.so*' 2>/dev/null | sort | head -n 1)
    if [ -z "$inc" ] || [ -z "$lib" ]; then continue; fi
    mkdir -p "$state/nccl/lib"
    ln -sfn "$(readlink -f "$lib")" "$state/nccl/lib/libnccl.so"
    echo "$(dirname "$inc")|$state/nccl/lib/libnccl.so"
    return 0
  done
  return 1
}

need_build() { [ -f "$state/stamps/build" ] && [ -x "$build/shardft" ]; }

# ---- test --------------------------------------------------------------------------------------
stage_test() {
  need_build || { result test skipped 0 reason="no build (the build stage has not succeeded)"; return 1; }
  local want; want=$(cat "$state/stamps/build")
  if stamp_ok test "$want"; then echo "validate: unit tests already run for this build"; return 0; fi
  kit_env
  local t0; t0=$(now)
  local log=$state/logs/unit_tests.log json=$state/results/unit_tests_gtest.json
  rm -f "$json"
  local filter=(); [ -n "${UNIT_TEST_FILTER:-}" ] && filter=("--gtest_filter=$UNIT_TEST_FILTER")
  echo "validate: unit tests (log: $log)"
  local rc=0
  # The OpenMP threads the build was configured to test with (SHARDFT_TEST_OMP_THREADS, set by
  # jobs/gpu/build.sh): TestEnvironment checks that they arrive.
  local omp; omp=$(sed -n 's/^SHARDFT_TEST_OMP_THREADS:[A-Z]*=//p' "$build/CMakeCache.txt"); omp=${omp:-1}
  (cd "$build" && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=$omp OMP_WAIT_POLICY=passive OMP_PROC_BIND=false \
     "$build/tests/shardft_unit_tests" "${filter[@]}" --gtest_output="json:$json") > "$log" 2>&1 || rc=$?
  local secs; secs=$(since "$t0")
  python3 "$helper" gtest "$json" "$log" "$state/results/test.json" "$secs" "$rc" "$mode"
  [ "$rc" = 0 ] || return 1
  echo "$want" > "$state/stamps/test"
}

# ---- train: the default recipe -----------------------------------------------------------------
stage_train() {
  need_build || { result train skipped 0 reason="no build (the build stage has not succeeded)"; return 1; }
  local want; want=$(cat "$state/stamps/build")
  if stamp_ok train "$want"; then echo "validate: default recipe already run for this build"; return 0; fi
  kit_env
  local np=1; [ "$mode" = nogpu ] && np=2
  local run=$state/runs/default log=$state/logs/train_default.log
  rm -rf "$run"
  echo "validate: default recipe on $np rank(s) (log: $log)"
  local t0 rc=0; t0=$(now)
  (cd "$root" && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
     "$prefix/bin/mpirun" -np "$np" --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
       "$build/shardft" train --config jobs/recipes/default.yaml --output_dir "$run") > "$log" 2>&1 || rc=$?
  local secs; secs=$(since "$t0")
  python3 "$helper" train "$run/metrics.jsonl" "$log" "$state/results/train.json" "$secs" "$rc" "$np"
  [ "$rc" = 0 ] || return 1
  echo "$want" > "$state/stamps/train"
}

# ---- bench: a bf16 training step of a Llama shape ---------------------------------------------
# gpu: Llama 3.2 1B (1.24 B parameters, tied embeddings) at 2048 tokens; --no-gpu: a small shape that
# runs in seconds. The same numbers go to torch_bench.py.
bench_shape() {
  if [ "$mode" = cuda ]; then
    echo "name=llama-1b hidden=2048 layers=16 heads=32 kv_heads=8 inter=8192 vocab=128256 seq=2048 batch=${BENCH_BATCH:-2} steps=${BENCH_STEPS:-10} warmup=2 rope_theta=500000"
  else
    echo "name=small hidden=256 layers=4 heads=8 kv_heads=4 inter=688 vocab=32000 seq=256 batch=${BENCH_BATCH:-2} steps=${BENCH_STEPS:-4} warmup=2 rope_theta=10000"
  fi
}
stage_bench() {
  need_build || { result bench skipped 0 reason="no build (the build stage has not succeeded)"; return 1; }
  local shape; shape=$(bench_shape)
  local shape_args; read -ra shape_args <<<"$shape"
  local want; want="$(cat "$state/stamps/build") $shape"
  if stamp_ok bench "$want"; then echo "validate: benchmark already run for this build and shape"; return 0; fi
  kit_env
  local dir=$state/bench log=$state/logs/bench_shardft.log
  rm -rf "$dir"; mkdir -p "$dir"
  python3 "$helper" bench-recipe "$dir" "$peak" "${shape_args[@]}"
  echo "validate: shardft bf16 benchmark ($shape; log: $log)"
  local sampler=""
  if [ "$mode" = cuda ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$dir/gpu_memory_mib.txt" 2>/dev/null &
    sampler=$!
  fi
  local t0 rc=0; t0=$(now)
  (cd "$root" && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive \
     "$prefix/bin/mpirun" -np 1 --bind-to none -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x OMP_WAIT_POLICY \
       "$build/shardft" train --config "$dir/recipe.yaml") > "$log" 2>&1 || rc=$?
  local secs; secs=$(since "$t0")
  [ -z "$sampler" ] || { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }
  python3 "$helper" bench-result "$dir" "$log" "$state/results/bench.json" "$secs" "$rc" "$peak" "${shape_args[@]}"
  rm -rf "$dir/run"  # the closing checkpoint of a 1B model is ~20 GB
  [ "$rc" = 0 ] || return 1
  echo "$want" > "$state/stamps/bench"
}

# ---- torch: the same step through PyTorch -----------------------------------------------------
stage_torch() {
  local py=${TORCH_PYTHON:-}
  if [ -z "$py" ]; then
    if [ -x /opt/torch/.venv/bin/python3 ]; then py=/opt/torch/.venv/bin/python3; else py=$(command -v python3); fi
  fi
  local probe
  if ! probe=$("$py" -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.is_available())" 2>&1); then
    result torch skipped 0 reason="torch and transformers are not importable by $py ($(tail -n 1 <<<"$probe")); set TORCH_PYTHON"
    echo "validate: PyTorch side by side skipped: not importable by $py"
    return 0
  fi
  local device=cuda
  case "$probe" in *False) device=cpu ;; esac
  if [ "$mode" = cuda ] && [ "$device" = cpu ]; then
    result torch failed 0 reason="torch ($probe) sees no CUDA device"; return 1
  fi
  local shape; shape=$(bench_shape)
  local shape_args; read -ra shape_args <<<"$shape"
  local want; want="$probe $shape $(cksum < "$root/jobs/gpu/torch_bench.py")"
  if stamp_ok torch "$want"; then echo "validate: PyTorch benchmark already run"; return 0; fi
  local log=$state/logs/bench_torch.log t0 rc=0; t0=$(now)
  echo "validate: PyTorch benchmark on $device (log: $log)"
  "$py" "$root/jobs/gpu/torch_bench.py" --device "$device" --peak-tflops "$peak" "${shape_args[@]}" \
    > "$state/results/torch_raw.json" 2> "$log" || rc=$?
  python3 "$helper" torch-result "$state/results/torch_raw.json" "$log" "$state/results/torch.json" "$(since "$t0")" "$rc"
  [ "$rc" = 0 ] || return 1
  echo "$want" > "$state/stamps/torch"
}

# ---- run the stages, then the report ------------------------------------------------------------
# Each stage runs in a subshell outside any condition, so that `set -e` holds inside it (bash drops
# it in a function called from an `if`); one failing stage does not stop the others.
failed=()
worst=0
for s in "${stages[@]}"; do
  [ "$s" = report ] && continue
  set +e
  ( set -e; "stage_$s" )
  rc=$?
  set -e
  if [ "$rc" != 0 ]; then
    failed+=("$s"); [ "$rc" = 2 ] && worst=2; [ "$worst" = 2 ] || worst=1
    echo "validate: stage $s failed (see $state/logs/)" >&2
  fi
done
python3 "$helper" report "$state" "$out/gpu-validate-$mode.md" "$mode" "$kit" "$root"
echo "validate: report: $out/gpu-validate-$mode.md"
[ ${#failed[@]} -eq 0 ] || { echo "validate: failed stages: ${failed[*]}" >&2; exit "$worst"; }
