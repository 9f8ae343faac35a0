#!/usr/bin/env bash
# jobs/gpu/record_baseline.py: a probe record becomes perf/baselines/gpu-<card>.json and one README row
# between the markers; the same run recorded twice keeps one row; rows are newest first; a record
# without a step time, from --no-gpu (card none) or with a key missing is refused (exit 2).
# Called by ctest as: bash gpu_record_baseline.sh BINARY SOURCE_DIR (the binary is not needed here).
set -euo pipefail
src=${2:?usage: gpu_record_baseline.sh BINARY SOURCE_DIR}
record=$src/jobs/gpu/record_baseline.py
command -v python3 >/dev/null || { echo "SKIP: python3 not found"; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$tmp/root"
printf '# x\n\n## GPU\n\ntext before\n\n<!-- gpu-baselines:begin -->\n<!-- gpu-baselines:end -->\n\ntext after\n' > "$tmp/root/README.md"
rec() {  # FILE DATE CARD STEP_MS
  cat > "$1" <<EOF
{"card": "$3", "date": "$2", "commit": "0123456789abcdef", "tree_dirty": "false", "step_ms": $4,
 "pytorch_step_ms": 400.0, "shardft_over_pytorch": $(python3 -c "print($4 / 400.0)"), "tokens_per_s": 4096.0,
 "mfu": 0.2, "peak_memory_bytes": 32212254720, "pytorch_peak_memory_bytes": 21474836480,
 "unit_tests": {"passed": 577, "failed": 0, "skipped": 1}, "kernel_shares": [{"kernel": "k", "share": 0.5, "count": 3}]}
EOF
}
rec "$tmp/a.json" 2026-11-20T10:00:00Z h100 1210.0
rec "$tmp/b.json" 2026-11-26T09:00:00Z h100 900.0
rec "$tmp/c.json" 2026-11-21T09:00:00Z h200 800.0

python3 "$record" "$tmp/a.json" --root "$tmp/root" >/dev/null || fail "a valid record was refused"
cmp -s <(python3 -m json.tool "$tmp/a.json") <(python3 -m json.tool "$tmp/root/perf/baselines/gpu-h100.json") \
  || fail "perf/baselines/gpu-h100.json is not the record"
python3 "$record" "$tmp/a.json" --root "$tmp/root" >/dev/null
rows=$(grep -c '^| 2026-' "$tmp/root/README.md")
[ "$rows" = 1 ] || fail "the same run recorded twice: $rows rows, expected 1"
python3 "$record" "$tmp/b.json" --root "$tmp/root" >/dev/null
python3 "$record" "$tmp/c.json" --root "$tmp/root" >/dev/null
dates=$(grep '^| 2026-' "$tmp/root/README.md" | cut -d'|' -f2 | tr -d ' ' | paste -sd,)
[ "$dates" = "2026-11-2609:00,2026-11-2109:00,2026-11-2010:00" ] || fail "rows not newest first: $dates"
grep -q '^| 2026-11-26 09:00 | h100 | 0123456789 | 900.0 | 4,096 | 0.200 | 30.0 GiB | 400.0 | 20.0 GiB | 2.25 | 577/0/1 |$' \
  "$tmp/root/README.md" || fail "row format: $(grep '^| 2026-11-26' "$tmp/root/README.md")"
grep -q 'step_ms": 900.0' "$tmp/root/perf/baselines/gpu-h100.json" || fail "the card's baseline is not its latest record"
[ -f "$tmp/root/perf/baselines/gpu-h200.json" ] || fail "no gpu-h200.json"
grep -q '^text after$' "$tmp/root/README.md" || fail "the text after the table is lost"
grep -q '^text before$' "$tmp/root/README.md" || fail "the text before the table is lost"

refused() {  # FILE WHAT
  local rc=0
  python3 "$record" "$1" --root "$tmp/root" >/dev/null 2>"$tmp/err" || rc=$?
  [ "$rc" = 2 ] || fail "$2: exit $rc, expected 2"
}
sed 's/"step_ms": 1210.0/"step_ms": null/' "$tmp/a.json" > "$tmp/nostep.json"; refused "$tmp/nostep.json" "no step time"
sed 's/"card": "h100"/"card": "none"/' "$tmp/a.json" > "$tmp/none.json"; refused "$tmp/none.json" "card none"
sed 's/"mfu": 0.2, //' "$tmp/a.json" > "$tmp/nomfu.json"; refused "$tmp/nomfu.json" "a key missing"
grep -q "missing mfu" "$tmp/err" || fail "the missing key is not named: $(cat "$tmp/err")"
[ "$(grep -c '^| 2026-' "$tmp/root/README.md")" = 3 ] || fail "a refused record changed the table"
echo "PASS"
