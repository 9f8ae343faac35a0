#!/usr/bin/env bash
# jobs/gpu/kernel_registers.py: reads ptxas's report of each kernels/ source's compile into registers,
# blocks per SM and spill bytes per kernel; leaves out device functions without a register count;
# --max-spill-bytes fails only on shardft's own kernels (not Kokkos'); a build without nvcc is refused.
# The compiler here is a stand-in that prints a fixed ptxas report, so no CUDA toolkit is needed.
# Called by ctest as: bash gpu_kernel_registers.sh BINARY SOURCE_DIR (the binary is not needed here).
set -euo pipefail
src=${2:?usage: gpu_kernel_registers.sh BINARY SOURCE_DIR}
tool=$src/jobs/gpu/kernel_registers.py
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 0; }
command -v c++filt >/dev/null || { echo "SKIP: c++filt not found"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$tmp/root/kernels" "$tmp/build" "$tmp/cpu"
# The stand-in nvcc: a.cpp has a spilling kernel of shardft's, a Kokkos kernel that spills and a device
# function without a register count; b.cpp one kernel that does not spill.
cat > "$tmp/nvcc_wrapper" <<'EOF'
#!/usr/bin/env bash
for a in "$@"; do case $a in *a.cpp)
cat >&2 <<'R'
ptxas info    : Compiling entry function '_ZN7shardft3fooILi16EEEvv' for 'sm_90'
ptxas info    : Function properties for _ZN7shardft3fooILi16EEEvv
    184 bytes stack frame, 216 bytes spill stores, 212 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 184 bytes cumulative stack size
ptxas info    : Function properties for _ZN6Kokkos4Impl3barEv
    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers
ptxas info    : Function properties for __internal_trig_reduction_slowpathd
    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
R
;; *b.cpp)
cat >&2 <<'R'
ptxas info    : Function properties for _ZN7shardft3bazEv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, used 0 barriers
R
;; esac; done
EOF
chmod +x "$tmp/nvcc_wrapper"
python3 - "$tmp" <<'EOF'
import json, sys
t = sys.argv[1]
def entry(name, compiler, build):
    f = f"{t}/root/kernels/{name}"
    return {"directory": f"{t}/{build}", "file": f, "command": f"{compiler} -O3 -o {name}.o -c {f}"}
json.dump([entry("a.cpp", f"{t}/nvcc_wrapper", "build"), entry("b.cpp", f"{t}/nvcc_wrapper", "build")],
          open(f"{t}/build/compile_commands.json", "w"))
json.dump([entry("a.cpp", "/usr/bin/c++", "cpu")], open(f"{t}/cpu/compile_commands.json", "w"))
EOF

cd "$tmp/root"
rc=0; python3 "$tool" --build-dir "$tmp/build" --jobs 1 > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" -eq 0 ] || fail "report only (no limit) exited $rc: $(cat "$tmp/err")"
grep -Eq '^ +255 +1 +216  kernels/a\.cpp: void shardft::foo<16>\(\)' "$tmp/out" || fail "no spilling row: $(cat "$tmp/out")"
grep -Eq '^ +96 +2 +0  kernels/b\.cpp: shardft::baz\(\)' "$tmp/out" || fail "no row for b.cpp: $(cat "$tmp/out")"
grep -q 'Kokkos::Impl::bar' "$tmp/out" || fail "the Kokkos kernel is missing: $(cat "$tmp/out")"
! grep -q 'trig_reduction' "$tmp/out" || fail "a device function without registers was listed"
[ "$(head -2 "$tmp/out" | tail -1 | grep -c 'foo<16>')" -eq 1 ] || fail "the most spilling kernel is not first"
grep -q '3 kernels in 2 sources, 2 spill' "$tmp/err" || fail "summary: $(cat "$tmp/err")"

rc=0; python3 "$tool" --build-dir "$tmp/build" --jobs 1 --max-spill-bytes 4 > /dev/null 2> "$tmp/err" || rc=$?
[ "$rc" -eq 1 ] || fail "216 spilled bytes passed a limit of 4 (exit $rc)"
grep -q "1 of shardft's kernels spill more than 4 bytes" "$tmp/err" || fail "limit message (Kokkos' 8 bytes must not count): $(cat "$tmp/err")"
rc=0; python3 "$tool" --build-dir "$tmp/build" --jobs 1 --max-spill-bytes 216 > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 0 ] || fail "a limit of 216 failed (exit $rc): only shardft's kernels count, Kokkos' 8 bytes do not"
rc=0; python3 "$tool" --build-dir "$tmp/build" --files kernels/b.cpp --max-spill-bytes 0 > "$tmp/out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] && ! grep -q 'foo<16>' "$tmp/out" || fail "--files kernels/b.cpp: exit $rc, $(cat "$tmp/out")"

rc=0; python3 "$tool" --build-dir "$tmp/cpu" > /dev/null 2> "$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'no nvcc compiles' "$tmp/err" || fail "a host build was not refused (exit $rc): $(cat "$tmp/err")"
rc=0; python3 "$tool" --build-dir "$tmp/none" > /dev/null 2> "$tmp/err" || rc=$?
[ "$rc" -eq 1 ] && grep -q 'no .*compile_commands.json' "$tmp/err" || fail "a missing build was not refused: $(cat "$tmp/err")"
echo "PASS: kernel_registers.py"
