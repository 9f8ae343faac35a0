#!/usr/bin/env bash
# perf/compare.py: exit 0 within the threshold, 1 on a regression (naming it), aggregates preferred
# over repetitions, benchmarks in one file only listed but not failed.
# Called by ctest as: bash perf_compare.sh BINARY SOURCE_DIR (the binary is not needed here).
set -euo pipefail
src=${2:?usage: perf_compare.sh BINARY SOURCE_DIR}
compare=$src/perf/compare.py
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

bench() {  # name real_time [GFLOPS]
  if [[ $# -eq 3 ]]; then
    printf '{"name":"%s","run_name":"%s","run_type":"iteration","iterations":10,"real_time":%s,"cpu_time":%s,"time_unit":"us","GFLOPS":%s}' "$1" "$1" "$2" "$2" "$3"
  else
    printf '{"name":"%s","run_name":"%s","run_type":"iteration","iterations":10,"real_time":%s,"cpu_time":%s,"time_unit":"us"}' "$1" "$1" "$2" "$2"
  fi
}
doc() { local IFS=,; echo "{\"context\":{},\"benchmarks\":[$*]}"; }

doc "$(bench gemm/a 100 50)" "$(bench kernel/b 200)" "$(bench only/base 1)" >"$tmp/base.json"
# GFLOPS 5% lower, time 5% higher: within 10%.
doc "$(bench gemm/a 105 47.5)" "$(bench kernel/b 210)" "$(bench only/current 1)" >"$tmp/ok.json"
# kernel/b 30% slower (a time, lower is better); gemm/a better.
doc "$(bench gemm/a 90 55)" "$(bench kernel/b 260)" >"$tmp/slow_time.json"
# gemm/a GFLOPS 20% lower (a rate, higher is better), its time unchanged: the rate decides.
doc "$(bench gemm/a 100 40)" "$(bench kernel/b 200)" >"$tmp/slow_rate.json"

set +e
out=$(python3 "$compare" "$tmp/base.json" "$tmp/ok.json"); rc=$?
set -e
[[ $rc -eq 0 ]] || fail "within threshold: exit $rc, expected 0"$'\n'"$out"
grep -q "only/base" <<<"$out" || fail "a baseline-only benchmark is not listed"$'\n'"$out"
grep -q "only/current" <<<"$out" || fail "a current-only benchmark is not listed"$'\n'"$out"
grep -q "REGRESSION" <<<"$out" && fail "regression reported within threshold"$'\n'"$out"

set +e
out=$(python3 "$compare" "$tmp/base.json" "$tmp/slow_time.json"); rc=$?
set -e
[[ $rc -eq 1 ]] || fail "time regression: exit $rc, expected 1"$'\n'"$out"
grep -q "REGRESSION: kernel/b" <<<"$out" || fail "regressed name not printed"$'\n'"$out"
grep -q "REGRESSION: gemm/a" <<<"$out" && fail "an improvement reported as regression"$'\n'"$out"

set +e
out=$(python3 "$compare" "$tmp/base.json" "$tmp/slow_rate.json"); rc=$?
set -e
[[ $rc -eq 1 ]] || fail "rate regression: exit $rc, expected 1"$'\n'"$out"
grep -q "REGRESSION: gemm/a" <<<"$out" || fail "rate regression name not printed"$'\n'"$out"

# A looser threshold lets the 30% slowdown pass.
python3 "$compare" "$tmp/base.json" "$tmp/slow_time.json" --threshold 0.5 >/dev/null ||
  fail "--threshold 0.5 still fails a 30% slowdown"

# Repetitions: the median aggregate wins over the mean and over the individual repetitions.
agg() {  # name aggregate real_time
  printf '{"name":"%s_%s","run_name":"%s","run_type":"aggregate","aggregate_name":"%s","repetitions":3,"iterations":3,"real_time":%s,"cpu_time":%s,"time_unit":"ms"}' "$1" "$2" "$1" "$2" "$3" "$3"
}
doc "$(agg step/x mean 10)" "$(agg step/x median 10)" "$(agg step/x stddev 1)" >"$tmp/agg_base.json"
# mean 30% worse (one outlier), median 2% worse: passes.
doc "$(bench step/x 10200)" "$(bench step/x 10200)" "$(bench step/x 18600)" \
    "$(agg step/x mean 13)" "$(agg step/x median 10.2)" "$(agg step/x stddev 4)" >"$tmp/agg_cur.json"
python3 "$compare" "$tmp/agg_base.json" "$tmp/agg_cur.json" >/dev/null || fail "median aggregate not preferred"
# Repetitions without aggregates: their median (10.2 ms) is used.
doc "$(bench step/x 10200)" "$(bench step/x 18600)" "$(bench step/x 10100)" >"$tmp/reps_cur.json"
python3 "$compare" "$tmp/agg_base.json" "$tmp/reps_cur.json" >/dev/null || fail "median of repetitions not used"

# The memory family: peak_bytes decides (lower is better), even though the time got 3x better.
mem() {  # name real_time peak_bytes
  printf '{"name":"%s","run_name":"%s","run_type":"iteration","iterations":1,"real_time":%s,"cpu_time":%s,"time_unit":"ms","peak_bytes":%s,"state_bytes":1000}' "$1" "$1" "$2" "$2" "$3"
}
doc "$(mem memory/x 300 1000000)" >"$tmp/mem_base.json"
doc "$(mem memory/x 100 1250000)" >"$tmp/mem_grew.json"
doc "$(mem memory/x 900 950000)" >"$tmp/mem_shrank.json"
set +e
out=$(python3 "$compare" "$tmp/mem_base.json" "$tmp/mem_grew.json"); rc=$?
set -e
[[ $rc -eq 1 ]] || fail "25% more peak memory: exit $rc, expected 1"$'\n'"$out"
grep -q "peak_bytes" <<<"$out" || fail "memory benchmark not compared on peak_bytes"$'\n'"$out"
python3 "$compare" "$tmp/mem_base.json" "$tmp/mem_shrank.json" >/dev/null ||
  fail "less peak memory (and a slower step) flagged as a regression"

# Not a benchmark file: exit 2.
echo '{}' >"$tmp/bad.json"
set +e
python3 "$compare" "$tmp/base.json" "$tmp/bad.json" >/dev/null 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "bad input: exit $rc, expected 2"
echo "perf_compare: OK"
