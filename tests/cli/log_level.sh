#!/usr/bin/env bash
# log_level (HF's key): the default log is the run's report; debug adds the diagnostics (each of the
# first two steps' host<->device traffic, vendor libraries linked but idle); a level shardft does not
# have is an error naming the key.
# Usage: log_level.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run NAME ARGS...
  local name=$1; shift
  "$bin" train --config jobs/recipes/default.yaml --max_steps 3 --logging_steps 1 --do_eval false \
    --output_dir "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1
}

run info || { cat "$tmp/info.log"; fail "default run exited non-zero"; }
grep -q "host<->device traffic" "$tmp/info.log" && fail "the default log has the traffic diagnostics"
grep -q "linked but idle" "$tmp/info.log" && fail "the default log names idle libraries"
grep -q "^build: Kokkos" "$tmp/info.log" || fail "the default log lost its build line"
grep -q "device work of step" "$tmp/info.log" || fail "the default log lost the step's device work"

run debug --log_level debug || { cat "$tmp/debug.log"; fail "debug run exited non-zero"; }
[ "$(grep -c "host<->device traffic of step" "$tmp/debug.log")" = 2 ] || { cat "$tmp/debug.log"; fail "debug: not two traffic lines"; }

run bad --log_level warning && fail "log_level warning was accepted"
grep -q "key 'log_level' must be one of passive, info, debug, got 'warning'" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "the bad level is not named"; }
echo "PASS"
