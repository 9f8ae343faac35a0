#!/usr/bin/env bash
# The CPU BLAS's kernel (kernels/blas_core.hpp): the start-up log and `shardft --version` name the
# OpenBLAS core and how it was chosen; a core asked for with SHARDFT_BLAS_CORE takes effect by a restart
# before MPI starts (under mpirun too, on every rank: the same pid), the MFU basis names the core its rate
# was measured on; the user's own OPENBLAS_CORETYPE always wins, and SHARDFT_BLAS_CORE=off keeps the
# library's choice.
# Usage: blas_core.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
unset OPENBLAS_CORETYPE SHARDFT_BLAS_CORE SHARDFT_BLAS_CORE_FROM
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run NAME [mpirun -np N] : a two-step default run
  local name=$1; shift
  "$@" "$bin" train --config jobs/recipes/default.yaml --max_steps 2 --logging_steps 1 --do_eval false \
    --save_strategy no --output_dir "$tmp/$name" > "$tmp/$name.log" 2>&1
}

"$bin" --version > "$tmp/version" 2>&1 || fail "shardft --version exited non-zero"
grep -q "^blas: OpenBLAS core [A-Za-z0-9_]*" "$tmp/version" || { cat "$tmp/version"; fail "--version names no BLAS core"; }
own=$(sed -n 's/^blas: OpenBLAS core \([A-Za-z0-9_]*\).*/\1/p' "$tmp/version")
case "$own" in Prescott|Katmai|Core2|Penryn|Nehalem|Atom|Generic)
  grep -q "chosen by shardft over $own" "$tmp/version" && fail "--version restarted itself";;
esac

run own || { cat "$tmp/own.log"; fail "the default run exited non-zero"; }
grep -q "^blas: OpenBLAS core " "$tmp/own.log" || { head -20 "$tmp/own.log"; fail "the start-up log names no BLAS core"; }
grep -q "measured fp32 GEMM rate of OpenBLAS core " "$tmp/own.log" || { grep MFU "$tmp/own.log"; fail "the MFU basis names no core"; }

# A core asked for: Haswell's kernels run on every AVX2 machine this suite runs on.
if grep -qw avx2 /proc/cpuinfo; then
  want=Haswell; [ "$own" = Haswell ] && want=Sandybridge
  SHARDFT_BLAS_CORE=$want run asked timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 || { cat "$tmp/asked.log"; fail "SHARDFT_BLAS_CORE=$want exited non-zero"; }
  grep -q "^blas: OpenBLAS core $want, as SHARDFT_BLAS_CORE=$want asks, over $own" "$tmp/asked.log" \
    || { grep -i "blas" "$tmp/asked.log"; fail "SHARDFT_BLAS_CORE=$want did not take effect"; }
  grep -q "measured fp32 GEMM rate of OpenBLAS core $want" "$tmp/asked.log" || fail "the restarted run measured another core"
  grep -q "'step': 2}" "$tmp/asked.log" || fail "the restarted run did not train"
fi

# The user's variable wins; off keeps the library's choice.
OPENBLAS_CORETYPE=Haswell SHARDFT_BLAS_CORE=SkylakeX "$bin" --version > "$tmp/user" 2>&1
grep -q "OPENBLAS_CORETYPE=Haswell from the environment" "$tmp/user" || { cat "$tmp/user"; fail "the user's OPENBLAS_CORETYPE is not named"; }
SHARDFT_BLAS_CORE=off run off || { cat "$tmp/off.log"; fail "SHARDFT_BLAS_CORE=off exited non-zero"; }
grep -q "^blas: OpenBLAS core $own, the library's own choice" "$tmp/off.log" || { grep -i blas "$tmp/off.log"; fail "off changed the core"; }
echo "PASS"
