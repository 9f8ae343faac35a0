#!/usr/bin/env bash
# Builds shardft against a Kokkos 4.x compiled from its source: with CUDA (the GPU build; nvcc, no
# GPU needed to compile) or, with --openmp, with OpenMP (the race check: the whole suite at 2 threads
# per rank). CI keeps Debian's Kokkos 3.4 (Serial) and cannot do either; run this before a change to
# kernels/, src/model/, src/parallel/ or comm/ lands.
#
#   jobs/gpu/build.sh [--openmp] [--test] [--no-test] KOKKOS_SOURCE_DIR
#
# KOKKOS_SOURCE_DIR is an extracted Kokkos release (4.6.01 is the one checked), e.g.
#   git clone --depth 1 --branch 4.6.01 https://github.com/kokkos/kokkos .cache/kokkos-4.6.01
# (.cache/ is ignored by git; never commit Kokkos). The source tree is not modified: it is copied to
# .cache/kokkos-<version>-<backend>/src, where a CUDA 13 toolkit gets the three runtime-API updates
# Kokkos 4.6 needs (jobs/gpu/patch_kokkos_cuda13.py) and nvcc_wrapper's default architecture is set to
# GPU_ARCH's (CUDA 13 has dropped the sm_70 it defaults to). Kokkos is built and installed there once
# and reused while its source and options stay the same.
#
# cuDNN's fused attention (kernels/cuda/cudnn_attention) also needs NVIDIA's header-only cudnn-frontend
# (v1.23.0 is the one checked), fetched the same way and never committed either:
#   git clone --depth 1 --branch v1.23.0 https://github.com/NVIDIA/cudnn-frontend /tmp/cudnn-frontend
#   mkdir -p .cache/cudnn-frontend && cp -r /tmp/cudnn-frontend/include .cache/cudnn-frontend/
# and libcudnn 9 beside the CUDA toolkit (or CUDNN_ROOT=<a cuDNN install>). Without either the build
# goes on with the cuDNN attention left out; the configure summary printed below says which.
#
# Then every shardft target (binary, tests, benchmarks) is configured and built in build-cuda/ or
# build-openmp/ (SHARDFT_GPU_BUILD_DIR overrides); any compile error fails the script. The build folder's
# build-source.txt names the commit and the uncommitted changes it was built from.
#   --test     run ctest after building (CUDA: needs a GPU; OpenMP: the default)
#   --no-test  build only
# Environment: GPU_ARCH (a Kokkos architecture name: Hopper90 (default), Ampere80, Ampere86, Ada89,
# Blackwell100), JOBS (parallel compile jobs; default: the number of cores), OMP_THREADS (threads per
# rank for --openmp's test run; default 2), SHARDFT_CMAKE_ARGS (extra configure options),
# CUDNN_FRONTEND_DIR (cudnn-frontend's include directory; default .cache/cudnn-frontend/include),
# SHARDFT_GPU_TARGETS (build only these targets, e.g. "shardft shardft_unit_tests"; --test then runs
# only what was built at your own risk), SHARDFT_SKIP_INSTALL_DEPS=1 (no jobs/install-deps.sh: the
# dependencies come from elsewhere, e.g. jobs/gpu/validate.sh's offline kit).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)

backend=cuda
run_tests=""
src=""
for a in "$@"; do
  case "$a" in
    --openmp) backend=openmp ;;
    --test) run_tests=1 ;;
    --no-test) run_tests=0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "jobs/gpu/build.sh: unknown option $a (expected --openmp, --test, --no-test)" >&2; exit 2 ;;
    *) [ -z "$src" ] || { echo "jobs/gpu/build.sh: one Kokkos source directory expected, got '$src' and '$a'" >&2; exit 2; }
       src=$a ;;
  esac
done
if [ -z "$src" ]; then
  echo "usage: jobs/gpu/build.sh [--openmp] [--test|--no-test] KOKKOS_SOURCE_DIR (see the comment at its top)" >&2
  exit 2
fi
if [ ! -f "$src/CMakeLists.txt" ] || ! grep -q "set(Kokkos_VERSION_MAJOR" "$src/CMakeLists.txt"; then
  echo "jobs/gpu/build.sh: $src: not a Kokkos source tree (no CMakeLists.txt setting Kokkos_VERSION_MAJOR)" >&2
  exit 2
fi
src=$(cd "$src" && pwd)
[ -z "$run_tests" ] && { [ "$backend" = openmp ] && run_tests=1 || run_tests=0; }
jobs=${JOBS:-$(nproc)}

version_part() { sed -n "s/^set(Kokkos_VERSION_$1 \([0-9]*\))/\1/p" "$src/CMakeLists.txt"; }
kk_version="$(version_part MAJOR).$(version_part MINOR).$(version_part PATCH)"
case "$kk_version" in
  4.*) ;;
  *) echo "jobs/gpu/build.sh: $src is Kokkos $kk_version; the GPU build needs Kokkos 4.x" >&2; exit 2 ;;
esac

kokkos_opts=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_SERIAL=ON)
if [ "$backend" = cuda ]; then
  command -v nvcc >/dev/null || { echo "jobs/gpu/build.sh: nvcc not on PATH (the CUDA toolkit is needed)" >&2; exit 2; }
  arch=${GPU_ARCH:-Hopper90}
  sm=${arch//[!0-9]/}
  [ -n "$sm" ] || { echo "jobs/gpu/build.sh: GPU_ARCH=$arch: expected a Kokkos architecture name such as Hopper90" >&2; exit 2; }
  cuda_version=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1.\2/p')
  kokkos_opts+=(-DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_${arch^^}=ON" -DKokkos_ENABLE_CUDA_CONSTEXPR=ON)
  tag="cuda-${arch,,}"
else
  kokkos_opts+=(-DKokkos_ENABLE_OPENMP=ON)
  tag=openmp
fi
cache="$root/.cache/kokkos-$kk_version-$tag"
stamp="$cache/install/.shardft-stamp"
want_stamp="$(cd "$src" && find . -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.txt' -o -name '*.cmake' -o -name 'nvcc_wrapper' \) -print0 | sort -z | xargs -0 cksum | cksum) ${kokkos_opts[*]} $(cksum < "$root/jobs/gpu/patch_kokkos_cuda13.py")"

# ---- Kokkos ----------------------------------------------------------------------------------
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then
  echo "gpu/build: Kokkos $kk_version ($tag) already installed in $cache/install"
else
  echo "gpu/build: building Kokkos $kk_version ($tag) into $cache"
  rm -rf "$cache"
  mkdir -p "$cache"
  cp -a "$src" "$cache/src"
  compiler=()
  if [ "$backend" = cuda ]; then
    if [ "${cuda_version%%.*}" -ge 13 ]; then python3 "$root/jobs/gpu/patch_kokkos_cuda13.py" "$cache/src"; fi
    sed -i "s/^default_arch=\"sm_[0-9a-z]*\"/default_arch=\"sm_$sm\"/" "$cache/src/bin/nvcc_wrapper"
    grep -q "^default_arch=\"sm_$sm\"" "$cache/src/bin/nvcc_wrapper" \
      || { echo "jobs/gpu/build.sh: could not set nvcc_wrapper's default architecture" >&2; exit 1; }
    compiler=(-DCMAKE_CXX_COMPILER="$cache/src/bin/nvcc_wrapper")
  fi
  cmake -S "$cache/src" -B "$cache/build" -DCMAKE_INSTALL_PREFIX="$cache/install" "${compiler[@]}" "${kokkos_opts[@]}" \
    > "$cache/configure.log" 2>&1 || { cat "$cache/configure.log"; echo "gpu/build: Kokkos configure failed" >&2; exit 1; }
  cmake --build "$cache/build" -j"$jobs" > "$cache/build.log" 2>&1 \
    || { tail -n 60 "$cache/build.log"; echo "gpu/build: Kokkos build failed ($cache/build.log)" >&2; exit 1; }
  cmake --install "$cache/build" > /dev/null
  echo "$want_stamp" > "$stamp"
fi

# ---- shardft ---------------------------------------------------------------------------------
# Debian packages (MPI, HDF5, BLAS, ...) where apt can install them; a machine without apt (a lent
# GPU machine) must already have them.
if [ "${SHARDFT_SKIP_INSTALL_DEPS:-0}" != 1 ] && command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; then
  "$root/jobs/install-deps.sh"
fi
build=${SHARDFT_GPU_BUILD_DIR:-$root/build-$backend}
opts=(-DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$cache/install" -DKokkos_DIR="$cache/install/lib/cmake/Kokkos"
      -DSHARDFT_BUILD_TESTS=ON -DSHARDFT_BUILD_PERF=ON)
if [ "$backend" = cuda ]; then
  opts+=(-DCMAKE_CXX_COMPILER="$cache/install/bin/nvcc_wrapper" -DSHARDFT_WITH_CUDA=ON
         -DSHARDFT_CUDNN_FRONTEND_DIR="${CUDNN_FRONTEND_DIR:-$root/.cache/cudnn-frontend/include}")
else
  opts+=(-DSHARDFT_WITH_CUDA=OFF -DSHARDFT_TEST_OMP_THREADS="${OMP_THREADS:-2}")
fi
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" "${opts[@]}" ${SHARDFT_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; echo "gpu/build: shardft configure failed" >&2; exit 1; }
grep -E "^-- shardft:" "$build.configure.log" || true
grep -q "Kokkos $kk_version" "$build.configure.log" \
  || { echo "gpu/build: shardft did not pick up Kokkos $kk_version from $cache/install ($build.configure.log)" >&2; exit 1; }
targets=()
for t in ${SHARDFT_GPU_TARGETS:-}; do targets+=(--target "$t"); done
if ! cmake --build "$build" -j"$jobs" "${targets[@]}" > "$build.build.log" 2>&1; then
  grep -E -B2 -A6 "error" "$build.build.log" | head -n 120 >&2
  echo "gpu/build: shardft build failed: $(grep -c -E '(error|Error)[: ]' "$build.build.log") error lines ($build.build.log)" >&2
  exit 1
fi
echo "gpu/build: ${SHARDFT_GPU_TARGETS:-every shardft target} built with Kokkos $kk_version ($tag) in $build"
# What the binaries were built from, for jobs/gpu/pack.sh --prebuilt's manifest: the commit, and the
# changes to it (git status --porcelain: modified and untracked files alike, as CMake globs sources),
# and the git tree of the working tree as built (a scratch index, the real one untouched): when those
# changes are committed afterwards, pack.sh finds that commit's tree equal and names the commit.
worktree_tree() {
  local index
  index=$(mktemp)
  cp "$(git -C "$root" rev-parse --absolute-git-dir)/index" "$index" 2>/dev/null || true
  GIT_INDEX_FILE=$index git -C "$root" add -A >/dev/null 2>&1 && GIT_INDEX_FILE=$index git -C "$root" write-tree 2>/dev/null
  rm -f "$index"
}
{
  echo "commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "tree=$(worktree_tree || echo unknown)"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "targets=${SHARDFT_GPU_TARGETS:-all}"
  git -C "$root" status --porcelain 2>/dev/null | sed 's/^/changed=/' || true
} > "$build/build-source.txt"

[ "$run_tests" = 1 ] || exit 0
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OPENBLAS_NUM_THREADS=1
if [ "$backend" = openmp ]; then
  # Passive waiting: with 2 threads per rank and up to 4 ranks on 2 cores, spinning threads would
  # starve the ranks that hold the work.
  export OMP_NUM_THREADS=${OMP_THREADS:-2} OMP_WAIT_POLICY=passive OMP_PROC_BIND=false
fi
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 900
