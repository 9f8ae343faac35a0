#!/usr/bin/env bash
# Packs the offline kit for a lent GPU machine (no network; it has nvcc, CMake and Python, but no MPI,
# HDF5, BLAS, yaml-cpp or other -dev packages): one git-ignored folder, carried there beside the
# working tree, that jobs/gpu/validate.sh unpacks into a private prefix.
#
#   jobs/gpu/pack.sh KOKKOS_SOURCE [KIT_DIR]                     the source kit (this script)
#   jobs/gpu/pack.sh --prebuilt [--build-dir DIR] [KIT_DIR]      the prebuilt kit: jobs/gpu/pack_prebuilt.sh
#
# The prebuilt kit (binaries built here, their libraries) is what jobs/gpu/probe.sh measures with in one
# device call; this source kit is validate.sh's, which builds on the GPU machine: the fallback when
# binaries built here do not run there. One KIT_DIR holds one kind: packing either replaces the other.
#
# KOKKOS_SOURCE: a Kokkos 4.x source tree or a tarball of one, e.g.
#   git clone --depth 1 --branch 4.6.01 https://github.com/kokkos/kokkos .cache/kokkos-4.6.01
# KIT_DIR: default .gpu-kit/ at the repository root (ignored by git; never commit it).
#
# Run as root on Debian bookworm (the build machine of DESIGN.md) with apt's package lists current.
# The kit holds:
#   kokkos-<version>.tar.xz  the source without its tests, examples and benchmarks (what a build needs)
#   debs/*.deb               `apt-get download`ed, nothing installed: the packages jobs/install-deps.sh
#                            names for the build, and every library they depend on, except what any
#                            Debian or Ubuntu 24.04 base with a C++ compiler has (see `base` below)
#   MANIFEST.txt             what is in it, with sizes
# Debs already in KIT_DIR/debs at the wanted version are kept. Fails when the kit passes KIT_MAX_MIB
# (default 60): the carry limit to a GPU machine is 64 MiB with the working tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "jobs/gpu/pack.sh: $*" >&2; exit 2; }
[ "${1:-}" != --prebuilt ] || exec bash "$root/jobs/gpu/pack_prebuilt.sh" "${@:2}"

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: jobs/gpu/pack.sh KOKKOS_SOURCE_DIR_OR_TARBALL [KIT_DIR] (see the comment at its top)"
case "$1" in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
kokkos_in=$1
kit=${2:-$root/.gpu-kit}
max_mib=${KIT_MAX_MIB:-60}
for tool in apt-get apt-cache dpkg-query dpkg-deb xz tar; do
  command -v "$tool" >/dev/null || die "$tool not found: packing needs a Debian machine with apt and xz"
done
[ "$(id -u)" -eq 0 ] || die "run as root (apt-get download writes through apt's sandbox user)"
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3) || die "python3 not found"

# The packages of jobs/install-deps.sh that a build links or runs, minus Debian's Kokkos 3.4 (the kit
# carries 4.x source) and the compiler, CMake and Python the GPU machine has. pkgconf: CMake finds
# PCRE2 and ICU through pkg-config, which a bare machine may lack. patchelf: Debian's Open MPI, UCX
# and friends carry a RUNPATH of /usr/lib/...; validate.sh points them into its prefix.
roots=(
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libpcre2-dev libicu-dev zlib1g-dev
  pkgconf patchelf
)
# What the target surely has, or must take from itself, not from a bookworm .deb: libc and the GCC
# runtime and toolchain (nvcc's host compiler brings its own, newer ones; a bookworm copy first on the
# library path would shadow them), Debian's essential set and the libraries every base image has with
# the same soname. A dependency on one of them is not followed any further. Not needed either: ssh
# (Open MPI starts ranks on other nodes with it), hwloc's optional plugins (X11, OpenCL, NVML probes:
# the core reads the topology from sysfs) and ICU's data tools.
base_names=(
  # libc and the GCC runtime and toolchain
  libc6 libc6-dev libc-dev-bin linux-libc-dev libcrypt1 libcrypt-dev libgcc-s1 'libstdc\+\+6' gcc 'g\+\+' cpp gfortran
  'binutils.*' '(gcc|g\+\+|cpp|gfortran)-[0-9]+(-base)?' 'lib(gcc|stdc\+\+|gfortran|objc)-[0-9]+-dev'
  'lib(asan|lsan|tsan|ubsan|hwasan|itm|atomic|gomp|cc1-|quadmath)[0-9]+' libbinutils 'libctf.*' libgprofng0
  'libisl[0-9]+' 'libmpc[0-9]+' 'libmpfr[0-9]+' libgmp10
  # essential and base-image packages
  dpkg tar perl perl-base 'perl-modules-.*' 'libperl[0-9.]+' debconf cdebconf adduser passwd debianutils
  install-info 'libpam.*' 'libaudit.*' libselinux1 'libsemanage.*' 'libsepol[0-9]+' libcap-ng0 libacl1 libattr1
  libmd0 'libdb5\.3' 'libgdbm.*' readline-common libreadline8 libtinfo6 libzstd1 liblzma5 'libbz2-1\.0' libudev1
  libuuid1
  # not needed
  autoconf automake autotools-dev m4 libltdl-dev openssh-client 'libjs-.*' libhwloc-plugins icu-devtools
)
base="^($(IFS='|'; echo "${base_names[*]}"))\$"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$kit/debs"

# ---- Kokkos source ---------------------------------------------------------------------------
if [ -d "$kokkos_in" ]; then
  src=$kokkos_in
elif [ -f "$kokkos_in" ]; then
  mkdir "$work/kokkos-in"
  tar -xf "$kokkos_in" -C "$work/kokkos-in" || die "$kokkos_in: not a tarball tar can read"
  src=$(dirname "$(find "$work/kokkos-in" -maxdepth 2 -name CMakeLists.txt | head -n 1)")
else
  die "$kokkos_in: no such Kokkos source directory or tarball"
fi
grep -qs "set(Kokkos_VERSION_MAJOR" "$src/CMakeLists.txt" || die "$kokkos_in: not a Kokkos source tree (no CMakeLists.txt setting Kokkos_VERSION_MAJOR)"
version_part() { sed -n "s/^set(Kokkos_VERSION_$1 \([0-9]*\))/\1/p" "$src/CMakeLists.txt"; }
kk_version="$(version_part MAJOR).$(version_part MINOR).$(printf %02d "$(version_part PATCH)")"
case "$kk_version" in 4.*) ;; *) die "$kokkos_in is Kokkos $kk_version; the GPU build needs 4.x (4.6.01 is the one checked)" ;; esac
[ "$kk_version" = 4.6.01 ] || echo "pack: warning: Kokkos $kk_version; jobs/gpu/build.sh's CUDA 13 patch is made for 4.6.01" >&2

# Tests, examples and benchmarks are only configured when asked for (Kokkos_ENABLE_TESTS, ...): a
# third of the tree that a build never reads.
kk="$work/kokkos-$kk_version"
mkdir "$kk"
tar -C "$src" --exclude=.git -cf - . | tar -C "$kk" -xf -
# The top-level example/ and benchmarks/ CMakeLists.txt are read in every configure; what they add is not.
find "$kk" -depth -type d \( -name unit_test -o -name unit_tests -o -name perf_test -o -name performance_tests \
  -o -name gtest \) -exec rm -rf {} +
find "$kk/example" "$kk/benchmarks" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
rm -rf "$kk/docs" "$kk/.github"
rm -f "$kit"/kokkos-*.tar.xz
[ ! -f "$kit/shardft-kit.tar.xz" ] || { echo "pack: replacing the prebuilt kit in $kit (shardft-kit.tar.xz)"; rm -f "$kit/shardft-kit.tar.xz"; }
tar -C "$work" --owner=0 --group=0 --sort=name -cf - "kokkos-$kk_version" | xz -9 -T0 > "$kit/kokkos-$kk_version.tar.xz"
echo "pack: kokkos-$kk_version.tar.xz ($(du -k "$kit/kokkos-$kk_version.tar.xz" | cut -f1) KiB, $(find "$kk" -type f | wc -l) files)"

# ---- Debian packages -------------------------------------------------------------------------
# apt-cache gives the whole graph; an alternative (a | b, or a virtual package) is resolved to the
# provider installed here (this machine builds shardft, so that is the tested choice), else the first.
apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
  --no-enhances "${roots[@]}" > "$work/graph.txt" || die "apt-cache depends failed (apt-get update first?)"
grep -v '^ ' "$work/graph.txt" | tr -d '<>' | sort -u > "$work/names.txt"
# shellcheck disable=SC2046  # package names, one word each
dpkg-query -W -f='${Package}\t${db:Status-Abbrev}\n' $(cat "$work/names.txt") 2>/dev/null \
  | awk '$2 == "ii" {print $1}' > "$work/installed.txt" || true
"$py" - "$work/graph.txt" "$work/installed.txt" "$base" "${roots[@]}" > "$work/closure.txt" <<'EOF'
import re, sys
graph_file, installed_file, base_re, roots = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
base = re.compile(base_re)
installed = set(open(installed_file).read().split())
# deps[pkg] = [[entry, ...], ...]: one list per group a | b | c; an entry is [name] for a real package or
# [] for a virtual one, with the providers apt-cache prints under it appended.
deps, groups, open_group = {}, None, False
for line in open(graph_file):
    line = line.rstrip("\n")
    if not line.startswith(" "):
        groups = deps.setdefault(line.strip("<>"), [])
        open_group = False
        continue
    if line.startswith("    "):
        groups[-1][-1].append(line.strip())
        continue
    m = re.match(r" ([ |])(?:Pre)?Depends: (\S+)", line)
    if not m:
        continue
    entry = [] if m.group(2).startswith("<") else [m.group(2)]
    if open_group:
        groups[-1].append(entry)
    else:
        groups.append([entry])
    open_group = m.group(1) == "|"
chosen, todo = set(), list(roots)
while todo:
    p = todo.pop()
    if p in chosen:
        continue
    chosen.add(p)
    for group in deps.get(p, []):
        cands = list(dict.fromkeys(c for entry in group for c in entry))
        if not cands or any(base.match(c) for c in cands):
            continue
        pick = next((c for c in cands if c in installed), cands[0])
        todo.append(pick)
print("\n".join(sorted(chosen)))
EOF

want=()
while read -r p; do
  v=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')
  [ -n "$v" ] && [ "$v" != "(none)" ] || die "no candidate version of $p (apt-get update?)"
  want+=("$p=$v")
done < "$work/closure.txt"

# Drop debs of packages no longer wanted, download the missing ones (apt-get download names files
# package_version_arch.deb with ':' as %3a).
keep="$work/keep.txt"; : > "$keep"
missing=()
for pv in "${want[@]}"; do
  p=${pv%%=*}; v=${pv#*=}
  f=$(ls "$kit/debs/${p}_${v//:/%3a}_"*.deb 2>/dev/null | head -n 1 || true)
  if [ -n "$f" ]; then basename "$f" >> "$keep"; else missing+=("$pv"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "pack: downloading ${#missing[@]} packages"
  (cd "$work" && mkdir dl && cd dl && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}" >/dev/null) \
    || die "apt-get download failed (network? apt-get update?)"
  for f in "$work"/dl/*.deb; do mv "$f" "$kit/debs/"; basename "$f" >> "$keep"; done
fi
for f in "$kit"/debs/*.deb; do
  grep -qxF "$(basename "$f")" "$keep" || { echo "pack: removing $(basename "$f") (no longer wanted)"; rm -f "$f"; }
done

# Static archives are most of the -dev packages' bytes (ICU's, OpenBLAS's, OpenSSL's, HDF5's: 120 MB
# unpacked) and the build links shared: they are taken out, with docs and man pages, and the package
# rebuilt, unless a CMake file in it names the archive (GoogleTest ships static libraries only).
# A repacked deb has nothing left to take out, so running pack.sh again leaves it alone.
for f in "$kit"/debs/*-dev_*.deb; do
  listing=$(dpkg-deb -c "$f" | awk '{print $6}')
  drop=$(grep -E '^\./usr/(lib/.*\.a|share/(doc|man|info)/.*[^/])$' <<<"$listing" || true)
  [ -n "$drop" ] || continue
  rm -rf "$work/repack"
  dpkg-deb -R "$f" "$work/repack"
  named=$(find "$work/repack" -name '*.cmake' -exec grep -ho '[A-Za-z0-9_.+-]*\.a\b' {} + 2>/dev/null | sort -u || true)
  removed=0
  while read -r path; do
    base_name=$(basename "$path")
    case "$path" in *.a) grep -qxF "$base_name" <<<"$named" && continue ;; esac
    rm -f "$work/repack/$path"; removed=$((removed + 1))
  done <<<"$drop"
  [ "$removed" -gt 0 ] || continue
  find "$work/repack" -depth -type d -empty ! -path "$work/repack/DEBIAN" -delete
  (cd "$work/repack" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 -r md5sum > DEBIAN/md5sums)
  size_kib=$(du -sk --exclude=DEBIAN "$work/repack" | cut -f1)
  sed -i "s/^Installed-Size: .*/Installed-Size: $size_kib/" "$work/repack/DEBIAN/control"
  before=$(stat -c %s "$f")
  dpkg-deb --root-owner-group -Zxz -z9 -b "$work/repack" "$f" >/dev/null
  echo "pack: $(basename "$f"): $removed static archives / docs taken out, $((before / 1024)) -> $(($(stat -c %s "$f") / 1024)) KiB"
done

# ---- manifest and size -----------------------------------------------------------------------
{
  echo "# shardft GPU kit, made by jobs/gpu/pack.sh on $(date -u +%Y-%m-%dT%H:%MZ) from $(. /etc/os-release; echo "$PRETTY_NAME")"
  echo "# roots: ${roots[*]}"
  echo "# bytes	file"
  (cd "$kit" && find . -type f ! -name MANIFEST.txt -printf '%s\t%P\n' | sort -k2)
} > "$kit/MANIFEST.txt"
total=$(du -sb "$kit" | cut -f1)
echo "pack: $kit: $(find "$kit/debs" -name '*.deb' | wc -l) debs + Kokkos $kk_version, $((total / 1048576)) MiB ($total bytes)"
echo "# total $total bytes" >> "$kit/MANIFEST.txt"
[ "$total" -le $((max_mib * 1048576)) ] || { echo "jobs/gpu/pack.sh: the kit is $((total / 1048576)) MiB, over KIT_MAX_MIB=$max_mib" >&2; exit 1; }
