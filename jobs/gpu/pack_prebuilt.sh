#!/usr/bin/env bash
# Packs the prebuilt GPU kit: the CUDA binaries built here (Debian bookworm) and every shared library
# they need that a lent GPU machine lacks, so that jobs/gpu/probe.sh spends that machine's scarce
# minutes measuring instead of compiling (jobs/gpu/validate.sh, from the source kit, builds there).
# Called as `jobs/gpu/pack.sh --prebuilt ...`.
#
#   jobs/gpu/pack.sh --prebuilt [--build-dir DIR] [KIT_DIR]
#
# Without --build-dir it first runs jobs/gpu/build.sh for shardft and shardft_unit_tests (Kokkos's
# source: KOKKOS_SOURCE, default .cache/kokkos-4.6.01; the Kokkos install is reused while its stamp
# matches, an up-to-date build compiles nothing; build folder SHARDFT_GPU_BUILD_DIR, default build-cuda/;
# -DSHARDFT_NATIVE=OFF: the GPU machine's CPU is not this one; ccache when installed).
# --build-dir DIR takes the binaries of an existing CUDA build folder as they are (read only).
# KIT_DIR: default .gpu-kit/ at the repository root (git-ignored); a source kit there (debs/,
# kokkos-*.tar.xz) is replaced: both do not fit the carry limit together.
#
# KIT_DIR/shardft-kit.tar.xz unpacks to one prefix:
#   bin/               shardft, shardft_unit_tests (stripped)
#   usr/bin/           Open MPI's orterun (also as mpirun, mpiexec), orted (singleton MPI_Init starts it), ompi_info
#   usr/lib/x86_64-linux-gnu/   every library of the ldd closure of the above and of Open MPI's and PMIx's
#                      plugins (openmpi/lib/openmpi3/, pmix2/lib/pmix/, kept at their places), with its
#                      help files (usr/share/openmpi, pmix2/share) and etc/openmpi; CUDA's runtime (cudart)
#   lib/cuda/          empty: probe.sh links cuBLAS, cuBLASLt, NCCL (and cuDNN if linked) there from the
#                      GPU machine's torch venv or CUDA toolkit (~800 MB here: no room in the kit)
#   kit.json, MANIFEST.txt
# Left out: libc and the GCC runtime (the GPU machine's own: kit.json names the newest GLIBC / GLIBCXX
# versions the kit needs, probe.sh compares), the CUDA driver, and the Open MPI / PMIx plugins for
# fabrics and OpenSHMEM a one-node check never uses (UCX, OFI, PSM, verbs), listed in MANIFEST.
# Every ELF file gets a DT_RPATH relative to $ORIGIN on the prefix's two library folders (patchelf):
# no LD_LIBRARY_PATH is needed, and one set on the GPU machine cannot shadow the kit's libraries.
# Fails (exit 1) when the kit and the working tree (tracked + untracked, what a device call carries)
# pass KIT_MAX_MIB (default 60; the carry limit is 64 MiB).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "jobs/gpu/pack.sh --prebuilt: $*" >&2; exit 2; }

build=""
kit=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a folder"; build=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (expected --build-dir DIR)" ;;
    *) [ -z "$kit" ] || die "one KIT_DIR expected, got '$kit' and '$1'"; kit=$1 ;;
  esac
  shift
done
kit=${kit:-$root/.gpu-kit}
max_mib=${KIT_MAX_MIB:-60}
for tool in patchelf ldd readelf strip xz tar git python3; do
  command -v "$tool" >/dev/null || die "$tool not found (patchelf: apt-get install patchelf; readelf, strip: binutils)"
done
arch_dir=/usr/lib/x86_64-linux-gnu
[ -d "$arch_dir" ] || die "no $arch_dir: packing expects Debian's x86-64 layout"

# ---- the binaries ------------------------------------------------------------------------------
if [ -z "$build" ]; then
  kokkos=${KOKKOS_SOURCE:-$root/.cache/kokkos-4.6.01}
  [ -d "$kokkos" ] || die "no Kokkos source at $kokkos: git clone --depth 1 --branch 4.6.01 https://github.com/kokkos/kokkos $kokkos (or set KOKKOS_SOURCE, or pass --build-dir)"
  build=${SHARDFT_GPU_BUILD_DIR:-$root/build-cuda}
  cmake_args="-DSHARDFT_NATIVE=OFF"
  command -v ccache >/dev/null && cmake_args+=" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  echo "pack: building shardft and shardft_unit_tests in $build (jobs/gpu/build.sh)"
  SHARDFT_GPU_BUILD_DIR=$build SHARDFT_GPU_TARGETS="shardft shardft_unit_tests" \
    SHARDFT_CMAKE_ARGS="$cmake_args ${SHARDFT_CMAKE_ARGS:-}" bash "$root/jobs/gpu/build.sh" --no-test "$kokkos" \
    || { echo "jobs/gpu/pack.sh --prebuilt: the build failed" >&2; exit 1; }
fi
[ -d "$build" ] || die "$build: no such build folder"
build=$(cd "$build" && pwd)
binaries=("$build/shardft" "$build/tests/shardft_unit_tests")
for b in "${binaries[@]}"; do [ -x "$b" ] || die "$b missing: not a complete build (build it with jobs/gpu/build.sh)"; done
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n 1; }
# -march=native host code would stop with SIGILL on a CPU without this one's extensions.
if [ "$(cache_value SHARDFT_NATIVE)" != OFF ] && [ "${KIT_ALLOW_NATIVE:-0}" != 1 ]; then
  die "$build was configured with SHARDFT_NATIVE=$(cache_value SHARDFT_NATIVE) (-march=native for this CPU, not the GPU machine's); build without --build-dir, or reconfigure it with -DSHARDFT_NATIVE=OFF (KIT_ALLOW_NATIVE=1 packs it anyway)"
fi
grep -q 'libcudart\.so' <<<"$(ldd "${binaries[0]}")" || die "${binaries[0]} does not link CUDA's runtime: not a CUDA build"
source_dir=$(cache_value CMAKE_HOME_DIRECTORY)
kokkos_dir=$(cache_value Kokkos_DIR)
kokkos_version=$(sed -n 's/^-- shardft: Kokkos \([0-9.]*\).*/\1/p' "$build.configure.log" 2>/dev/null | head -n 1 || true)
kokkos_arch=$(sed -n 's/^set(Kokkos_ARCH \(.*\))$/\1/p; s/^ *set(Kokkos_CUDA_ARCHITECTURES \(.*\))$/sm_\1/p' "$kokkos_dir/KokkosConfigCommon.cmake" 2>/dev/null | paste -sd' ' || true)

# What the binaries were built from: build-source.txt (jobs/gpu/build.sh writes it after a build);
# a folder built before that existed says so, with the state of its source tree now.
commit=unknown dirty=unknown changes=""
if [ -f "$build/build-source.txt" ] && [ ! "${binaries[0]}" -nt "$build/build-source.txt" ]; then
  commit=$(sed -n 's/^commit=//p' "$build/build-source.txt")
  changes=$(sed -n 's/^changed=//p' "$build/build-source.txt")
  if [ -n "$changes" ]; then dirty=true; else dirty=false; fi
  provenance="build-source.txt of $build"
  # Built from uncommitted changes that HEAD has committed since, exactly: the binaries are HEAD's.
  built_tree=$(sed -n 's/^tree=//p' "$build/build-source.txt")
  if [ "$dirty" = true ] && [ -n "$built_tree" ] && [ "$built_tree" = "$(git -C "$source_dir" rev-parse 'HEAD^{tree}' 2>/dev/null)" ]; then
    provenance="$provenance (built from $commit with changes that commit $(git -C "$source_dir" rev-parse --short HEAD) holds, tree for tree)"
    commit=$(git -C "$source_dir" rev-parse HEAD) dirty=false changes=""
  fi
else
  provenance="unknown: $build has no build-source.txt as new as its binaries; its source tree $source_dir is at $(git -C "$source_dir" rev-parse --short HEAD 2>/dev/null || echo '?') with $(git -C "$source_dir" status --porcelain 2>/dev/null | wc -l) changed files now"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
p=$work/shardft-kit
lib=$p/usr/lib/x86_64-linux-gnu
mkdir -p "$p/bin" "$p/usr/bin" "$lib" "$p/lib/cuda" "$p/etc"
for b in "${binaries[@]}"; do
  cp "$b" "$p/bin/"
  strip --strip-unneeded "$p/bin/$(basename "$b")"
done

# ---- Open MPI and PMIx: launcher, daemon, plugins, help texts ------------------------------------
# Its folders come from ompi_info; probe.sh relocates them with OPAL_PREFIX and PMIx's variables.
command -v ompi_info >/dev/null || die "ompi_info not found (apt-get install openmpi-bin)"
mpi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
mpi_prefix=$(mpi_path prefix)
mpi_pkglib=$(mpi_path pkglibdir)
[ "$mpi_prefix" = /usr ] || die "Open MPI's prefix is $mpi_prefix, not Debian's /usr"
pmix=$arch_dir/pmix2
[ -d "$pmix/lib/pmix" ] || die "no $pmix/lib/pmix: Debian's PMIx (libpmix2) is expected"
for t in orterun orted ompi_info; do cp "$(readlink -f "/usr/bin/$t")" "$p/usr/bin/$t"; done
ln -s orterun "$p/usr/bin/mpirun"
ln -s orterun "$p/usr/bin/mpiexec"
mkdir -p "$p/usr/share" "$p${mpi_pkglib}" "$p$pmix/lib/pmix"
cp -a /usr/share/openmpi "$p/usr/share/"
cp -a /etc/openmpi "$p/etc/"
cp -a "$pmix/share" "$p$pmix/"
# Plugins for fabrics (UCX, OFI, PSM, verbs) and OpenSHMEM (liboshmem) stay out: one node, MPI only.
fabric='lib(fabric|ucp|ucs|uct|ucm|ibverbs|rdmacm|psm_infinipath|psm2|infinipath|efa|oshmem)\.so|libmca_common_(ucx|verbs|ofi)\.so'
left_out=()
for f in "$mpi_pkglib"/mca_*.so "$pmix"/lib/pmix/*.so; do
  deps=$(ldd "$f" 2>/dev/null || true)
  if grep -qE "$fabric" <<<"$deps"; then left_out+=("$(basename "$f")"); continue; fi
  cp "$f" "$p$f"
done

# ---- the library closure ----------------------------------------------------------------------
# ldd of every ELF file collected so far (system files at their own place, so that their RUNPATHs
# resolve as they do here), without LD_LIBRARY_PATH. Each library lands once, under its soname.
is_elf() { local magic=""; IFS= read -r -n 4 magic < "$1" 2>/dev/null || true; [ "$magic" = $'\x7fELF' ]; }
system='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|lib(c|m|mvec|pthread|dl|rt|util|resolv|anl|nsl|BrokenLocale|thread_db)\.so\.[0-9]+|libnss_.*|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
driver='^lib(cuda|nvidia-.*)\.so'
host_cuda='^lib(cublas|cublasLt|nccl|cudnn[a-z_]*|cufft|cufftw|curand|cusolver|cusparse|nvJitLink|nvrtc)\.so'
declare -A have=() needed_from_host=() host_path=()
ldd_of() {
  local f=$1 rel=${1#"$p"}
  if [ -e "$rel" ] && [ "${rel#/bin/}" = "$rel" ]; then f=$rel; fi  # a system file: ldd it in place
  env -u LD_LIBRARY_PATH ldd "$f" 2>/dev/null | awk '/=>/ {print $1, $3}' || true
}
roots=()
while IFS= read -r -d '' f; do is_elf "$f" && roots+=("$f"); done < <(find "$p" -type f -print0)
for f in "${roots[@]}"; do
  while read -r soname path; do
    if [[ $soname =~ $system ]] || [[ $soname =~ $driver ]]; then continue; fi
    if [[ $soname =~ $host_cuda ]]; then
      needed_from_host[$soname]+=" $(basename "$f")"
      host_path[$soname]=$path
      continue
    fi
    [ -z "${have[$soname]:-}" ] || continue
    [ "$path" != not ] || die "$(basename "$f") needs $soname, which is not found on this machine either"
    cp "$(readlink -f "$path")" "$lib/$soname"
    chmod u+w "$lib/$soname"
    have[$soname]=$path
  done < <(ldd_of "$f")
done

# ---- RPATHs -------------------------------------------------------------------------------------
elf_count=0
while IFS= read -r -d '' f; do
  is_elf "$f" || continue
  d=$(dirname "$f")
  rpath="\$ORIGIN/$(realpath -m --relative-to="$d" "$lib"):\$ORIGIN/$(realpath -m --relative-to="$d" "$p/lib/cuda")"
  patchelf --force-rpath --set-rpath "${rpath//\/.:/:}" "$f" || die "patchelf could not set the RPATH of ${f#"$p"/}"
  elf_count=$((elf_count + 1))
done < <(find "$p" -type f -print0)

# Self-check: with this machine's CUDA libraries in lib/cuda (as probe.sh will link the GPU machine's),
# every library of every ELF file resolves inside the prefix, or is libc / the GCC runtime / the driver.
for so in "${!host_path[@]}"; do
  [ "${host_path[$so]}" = not ] || ln -sfn "$(readlink -f "${host_path[$so]}")" "$p/lib/cuda/$so"
done
bad=$(
  while IFS= read -r -d '' f; do
    is_elf "$f" || continue
    env -u LD_LIBRARY_PATH ldd "$f" 2>/dev/null | awk -v f="${f#"$p"/}" -v p="$p" '/=>/ && $3 !~ "^"p"/" {print f": "$1" => "$3}'
  done < <(find "$p" -type f -print0) | grep -vE ": (lib(c|m|mvec|pthread|dl|rt|util|resolv|anl|nsl)\.so\.[0-9]+|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libcuda\.so\.1) => " || true
)
find "$p/lib/cuda" -type l -delete
[ -z "$bad" ] || die "libraries resolved outside the kit: $(head -n 20 <<<"$bad")"

# ---- kit.json, MANIFEST, tarball ----------------------------------------------------------------
versions_needed() {  # the newest GLIBC_ / GLIBCXX_ version any ELF file of the kit asks for
  find "$p" -type f -print0 | while IFS= read -r -d '' f; do is_elf "$f" && readelf -V --wide "$f" 2>/dev/null; done \
    | { grep -o "$1_[0-9][0-9.]*" || true; } | sed "s/^$1_//" | sort -uV | tail -n 1
}
glibc_max=$(versions_needed GLIBC)
glibcxx_max=$(versions_needed GLIBCXX)
cudart=$(basename "$(readlink -f "$(ldd "${binaries[0]}" | awk '/libcudart/ {print $3}')")")
host_list=$(for so in "${!needed_from_host[@]}"; do echo "$so:$(tr ' ' '\n' <<<"${needed_from_host[$so]}" | sort -u | paste -sd, | sed 's/^,//')"; done | sort)
KJ_PACKED_ON="$(. /etc/os-release; echo "$PRETTY_NAME")" KJ_COMMIT=$commit KJ_DIRTY=$dirty KJ_PROVENANCE=$provenance \
KJ_CHANGES=$changes KJ_BUILD=$build KJ_SOURCE=$source_dir KJ_KOKKOS=$kokkos_version KJ_KOKKOS_ARCH=$kokkos_arch \
KJ_NVCC="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')" KJ_CUDART=$cudart \
KJ_GLIBC=$glibc_max KJ_GLIBCXX=$glibcxx_max KJ_HOST=$host_list KJ_LEFT_OUT="${left_out[*]}" \
python3 - "$p/kit.json" <<'EOF'
import json, os, sys, time
e = os.environ
host = []
for line in e["KJ_HOST"].split():
    soname, _, needed_by = line.partition(":")
    host.append({"soname": soname, "needed_by": needed_by.split(",")})
json.dump({
    "kind": "shardft prebuilt GPU kit", "packed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "packed_on": e["KJ_PACKED_ON"], "commit": e["KJ_COMMIT"], "dirty": e["KJ_DIRTY"],
    "provenance": e["KJ_PROVENANCE"], "changes": [c for c in e["KJ_CHANGES"].splitlines() if c],
    "build_dir": e["KJ_BUILD"], "source_dir": e["KJ_SOURCE"], "kokkos": e["KJ_KOKKOS"],
    "kokkos_arch": e["KJ_KOKKOS_ARCH"], "nvcc": e["KJ_NVCC"], "cudart": e["KJ_CUDART"],
    "glibc_needed": e["KJ_GLIBC"], "glibcxx_needed": e["KJ_GLIBCXX"], "cuda_from_gpu_machine": host,
    "left_out_plugins": e["KJ_LEFT_OUT"].split(), "binaries": ["bin/shardft", "bin/shardft_unit_tests"],
}, open(sys.argv[1], "w"), indent=1)
EOF

manifest() {
  echo "# shardft prebuilt GPU kit, made by jobs/gpu/pack.sh --prebuilt on $(date -u +%Y-%m-%dT%H:%MZ) from $(. /etc/os-release; echo "$PRETTY_NAME")"
  echo "# binaries built from commit $commit, tree dirty: $dirty ($provenance)"
  [ -z "$changes" ] || sed 's/^/#   changed: /' <<<"$changes" | head -n 30
  echo "# build folder $build (source $source_dir); Kokkos $kokkos_version ($kokkos_arch); CUDA runtime in the kit: $cudart"
  echo "# needs from the GPU machine: glibc >= $glibc_max, libstdc++ with GLIBCXX_$glibcxx_max, the CUDA driver, and (linked"
  echo "#   into lib/cuda/ by probe.sh from the torch venv or the CUDA toolkit):"
  sed 's/^/#     /; s/:/  needed by /' <<<"$host_list"
  echo "# Open MPI / PMIx plugins left out (fabrics: UCX, OFI, PSM, verbs; OpenSHMEM): ${left_out[*]}"
  echo "# unpacked: $(du -sb "$p" | cut -f1) bytes in $(find "$p" -type f | wc -l) files ($elf_count ELF files, RPATH on \$ORIGIN)"
  echo "# bytes	file"
  (cd "$p" && find . \( -type f -o -type l \) ! -name MANIFEST.txt -printf '%s\t%P\n' | sort -k2)
}
manifest > "$p/MANIFEST.txt"

mkdir -p "$kit"
if [ -d "$kit/debs" ] || ls "$kit"/kokkos-*.tar.xz >/dev/null 2>&1; then
  echo "pack: replacing the source kit in $kit (debs/, kokkos-*.tar.xz)"
  rm -rf "$kit/debs" "$kit"/kokkos-*.tar.xz
fi
echo "pack: compressing $(du -sm "$p" | cut -f1) MiB (xz -9)"
tar -C "$work" --owner=0 --group=0 --sort=name -cf - shardft-kit | xz -9 -T0 > "$kit/shardft-kit.tar.xz.tmp"
mv "$kit/shardft-kit.tar.xz.tmp" "$kit/shardft-kit.tar.xz"
cp "$p/MANIFEST.txt" "$kit/MANIFEST.txt"
kit_bytes=$(du -sb "$kit" | cut -f1)
tree_bytes=$(cd "$root" && { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 -r du -cb 2>/dev/null | awk '$2 == "total" {s += $1} END {print s + 0}')
total=$((kit_bytes + tree_bytes))
{
  echo "# tarball shardft-kit.tar.xz: $(stat -c %s "$kit/shardft-kit.tar.xz") bytes; kit folder $kit_bytes bytes + working tree $tree_bytes bytes = $total bytes ($((total / 1048576)) MiB, limit $max_mib MiB)"
} >> "$kit/MANIFEST.txt"
echo "pack: $kit: shardft-kit.tar.xz $(( $(stat -c %s "$kit/shardft-kit.tar.xz") / 1048576 )) MiB; with the working tree $((total / 1048576)) MiB of $max_mib"
echo "pack: binaries from commit $commit (dirty: $dirty); from the GPU machine: $(cut -d: -f1 <<<"$host_list" | paste -sd' ')"
if [ "$total" -gt $((max_mib * 1048576)) ]; then
  echo "jobs/gpu/pack.sh --prebuilt: kit ($kit_bytes bytes) + working tree ($tree_bytes bytes) = $((total / 1048576)) MiB, over KIT_MAX_MIB=$max_mib: a device call carries 64 MiB at most" >&2
  exit 1
fi
