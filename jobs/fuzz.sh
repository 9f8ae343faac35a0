#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang++, ASan + UBSan) into build-fuzz/ and runs each for SECONDS.
# Usage: jobs/fuzz.sh [SECONDS (60)] [TARGET ...]   (targets: safetensors tokenizer recipe deepspeed jsonl
#        checkpoint_meta jinja; default all, one after another)
# Each run starts from tests/fuzz/corpus/<target>/ and the regression inputs, and writes what it learns
# (new corpus inputs) and what it finds (crash-*, leak-*, timeout-*, oom-*) under $SHARDFT_FUZZ_OUT
# (default build-fuzz/runs/<target>/), never into the committed corpus. Runs one worker at nice 19;
# SHARDFT_FUZZ_ARGS adds libFuzzer flags. Exits 1 when a run found something.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors tokenizer recipe deepspeed jsonl checkpoint_meta jinja)
build=${SHARDFT_FUZZ_BUILD_DIR:-$root/build-fuzz}
out=${SHARDFT_FUZZ_OUT:-$build/runs}

command -v clang++ > /dev/null || { echo "fuzz.sh: needs clang++ (Debian: apt-get install clang)"; exit 2; }
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  -DSHARDFT_BUILD_FUZZ=ON -DSHARDFT_BUILD_TESTS=OFF -DSHARDFT_BUILD_PERF=OFF -DSHARDFT_WITH_CUDA=OFF \
  ${SHARDFT_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"${SHARDFT_FUZZ_BUILD_JOBS:-2}" --target "${targets[@]/#/fuzz_}"

status=0
for t in "${targets[@]}"; do
  mkdir -p "$out/$t/corpus" "$out/$t/findings"
  seeds=("$root/tests/fuzz/corpus/$t")
  [ -d "$root/tests/fuzz/regressions/$t" ] && seeds+=("$root/tests/fuzz/regressions/$t")
  # A template may work up to its render budget (src/jinja/limits.hpp): ~0.1 s, but 10-15 s under
  # ASan and the fuzzer's instrumentation, which is not a finding.
  unit_timeout=10
  [ "$t" = jinja ] && unit_timeout=40
  echo "fuzz.sh: $t for ${seconds}s (findings in $out/$t/findings)"
  # The first corpus folder is where libFuzzer writes new inputs: the scratch one, not the committed seeds.
  # shellcheck disable=SC2086
  if ! ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
      nice -n 19 "$build/tests/fuzz/fuzz_$t" "$out/$t/corpus" "${seeds[@]}" -max_total_time="$seconds" \
      -timeout="$unit_timeout" -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/$t/findings/" \
      ${SHARDFT_FUZZ_ARGS:-} > "$out/$t/log.txt" 2>&1; then
    status=1
    echo "fuzz.sh: $t FOUND something: $out/$t/log.txt"
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$out/$t/log.txt" | sed "s/^/  /" || true
done
exit $status
