#!/usr/bin/env bash
# Installs the Debian bookworm packages shardft builds and tests with.
# Idempotent: when every package is already installed it returns at once without touching apt.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  openmpi-bin libopenmpi-dev            # MPI bootstrap and CPU collectives
  libhdf5-openmpi-dev                   # parallel HDF5 for sharded checkpoints
  libtrilinos-kokkos-dev                # Kokkos 3.4 (Serial backend)
  libopenblas-dev                       # CPU GEMM
  libgtest-dev libgmock-dev             # unit tests
  libbenchmark-dev                      # perf/ suite
  libyaml-cpp-dev nlohmann-json3-dev    # recipes, JSONL, HF json files
  libpcre2-dev libicu-dev               # BPE tokenizer: tokenizer.json regexes, NFC
  zlib1g-dev                            # PNG plots (shardft plot)
  libxxhash-dev                         # XXH3 checksums of checkpoints (header only)
  python3                               # perf/compare.py, data generator, test scripts
  procps                                # pkill in the preemption test
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
