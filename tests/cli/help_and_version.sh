#!/usr/bin/env bash
# Help a newcomer finds: `shardft --help` lists the commands, `shardft <command> --help` works for every
# one of them (exit 0, its usage line; train's lists every recipe key under its group), `shardft
# --version` names the version, the commit and the build, and `shardft keys` lists every key by group,
# no line wider than the terminal it was given. An unknown command with --help is still an error.
# Usage: help_and_version.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }

"$bin" --help > "$tmp/usage" 2>&1 || fail "shardft --help exited non-zero"
commands="train eval generate estimate consolidate inspect plot keys"
for c in $commands; do
  grep -q "^  $c " "$tmp/usage" || { cat "$tmp/usage"; fail "shardft --help does not list $c"; }
  "$bin" "$c" --help > "$tmp/$c.help" 2>&1 || { cat "$tmp/$c.help"; fail "shardft $c --help exited non-zero"; }
  head -1 "$tmp/$c.help" | grep -q "^usage: shardft $c" || { cat "$tmp/$c.help"; fail "shardft $c --help has no usage line"; }
done
"$bin" train --config jobs/recipes/default.yaml -h > "$tmp/train-h.help" 2>&1 || fail "-h after other arguments"
cmp -s "$tmp/train.help" "$tmp/train-h.help" || fail "-h and --help differ"

# every recipe key in train's help, under the group `keys` puts it in
"$bin" keys > "$tmp/keys" || fail "shardft keys exited non-zero"
group=""
n=0
while IFS= read -r line; do
  case "$line" in
    [a-zA-Z]*:) group=${line%:} ;;
    "  "[a-z]*)
      key=$(echo "$line" | awk '{print $1}')
      n=$((n + 1))
      awk -v g="  $group:" -v k="$key" '
        index($0, "  ") == 1 && $1 ~ /:$/ { cur = "  " $1 }
        { for (i = 1; i <= NF; ++i) if ($i == k && cur == g) found = 1 }
        END { exit found ? 0 : 1 }' "$tmp/train.help" || fail "recipe key $key is not under $group in train's help"
      ;;
  esac
done < "$tmp/keys"
[ "$n" -gt 90 ] || fail "shardft keys listed only $n keys"
for g in model data training evaluation logging checkpoints parallel LoRA; do
  grep -q "^$g:$" "$tmp/keys" || fail "shardft keys has no group $g"
done
awk 'length($0) > 100 { print; bad = 1 } END { exit bad }' "$tmp/keys" "$tmp/train.help" \
  || fail "lines wider than 100 columns (the width of a pipe)"

"$bin" --version > "$tmp/version" 2>&1 || fail "shardft --version exited non-zero"
cat "$tmp/version"
grep -Eq '^shardft [0-9]+\.[0-9]+\.[0-9]+ \(commit [0-9a-f]{7,}(-dirty)?\)$' "$tmp/version" || fail "no version and commit line"
grep -q "^build: Kokkos [0-9.]* (.*), GEMM " "$tmp/version" || fail "no build line"

"$bin" nosuchcommand --help > "$tmp/bad" 2>&1 && fail "an unknown command's --help exited 0"
grep -q "unknown command 'nosuchcommand'" "$tmp/bad" || fail "the unknown command is not named"
echo "PASS"
