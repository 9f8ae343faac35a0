#!/usr/bin/env bash
# A chat template is downloaded input (a model's tokenizer_config.json, or a file): one that recurses
# without end, nests 100000 brackets, divides the smallest integer by -1, loops 10^10 times or builds a
# 10 GB string stops the run with exit 2 and an error naming the file and the line, in about a second,
# before anything is written; no crash, no hang, no memory exhaustion (src/jinja/limits.hpp).
# Usage: hostile_chat_template.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

deep=$(python3 -c 'print("{{ " + "(" * 100000 + "1" + ")" * 100000 + " }}")')
templates=(
  '{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}|macro calls nested deeper than 100'
  "$deep|nested deeper than 100 levels"
  '{{ (-9223372036854775807 - 1) // -1 }}|integer overflow'
  '{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}|steps of work in one render'
  "{{ 'x' * 10000000000 }}|a string of 10000000000 bytes"
)
for case in "${templates[@]}"; do
  template=${case%|*}; want=${case##*|}
  printf '%s\n' "$template" > "$tmp/evil.jinja"
  rm -rf "$tmp/out"
  timeout 60 "$bin" train --config jobs/recipes/default.yaml --chat_template "$tmp/evil.jinja" --max_steps 1 \
    --output_dir "$tmp/out" > "$tmp/log" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || { tail -5 "$tmp/log"; fail "exit $rc (want 2) for a template failing with: $want"; }
  grep -qF "error: $tmp/evil.jinja, line 1 column" "$tmp/log" || { tail -5 "$tmp/log"; fail "the error does not name the file and line"; }
  grep -qF "$want" "$tmp/log" || { tail -5 "$tmp/log"; fail "the error does not say: $want"; }
  [ ! -e "$tmp/out" ] || fail "the failed run wrote $tmp/out"
done
echo "ok"
