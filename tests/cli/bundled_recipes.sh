#!/usr/bin/env bash
# Every bundled recipe runs as shipped: each `bash jobs/mpirun.sh ...` command written in a
# jobs/recipes/*.yaml header is run as written (2 steps, no eval, a scratch output_dir), so a recipe
# whose documented command stopped working fails here. The DeepSpeed configs run beside the default
# recipe, as the README shows them.
# Usage: bundled_recipes.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 SHARDFT_BIN=$bin
fails=0; runs=0
short=(--max_steps 2 --do_eval false --save_strategy no)

run() {  # run NAME COMMAND...: must exit 0 and log a loss
  local name=$1; shift
  runs=$((runs+1))
  if ! timeout 300 "$@" "${short[@]}" --output_dir "$tmp/$name" > "$tmp/$name.log" 2>&1; then
    echo "FAIL $name: exit non-zero: $*"; tail -5 "$tmp/$name.log"; fails=$((fails+1))
  elif ! grep -qE "^\{'loss': [0-9.e+-]+" "$tmp/$name.log"; then
    echo "FAIL $name: no loss line"; tail -5 "$tmp/$name.log"; fails=$((fails+1))
  else
    echo "ok   $name: $*"
  fi
}

for recipe in jobs/recipes/*.yaml; do
  base=$(basename "$recipe" .yaml)
  # The header's commands, joined across backslash continuations: "#   bash jobs/mpirun.sh ... \" + "#     ...".
  mapfile -t commands < <(sed -n 's/^#  *//p' "$recipe" | awk '
    /^bash jobs\/mpirun.sh/ { cmd = $0; while (cmd ~ /\\$/ && (getline next_line) > 0) { sub(/\\$/, "", cmd); cmd = cmd " " next_line } print cmd }')
  [ ${#commands[@]} -gt 0 ] || { echo "FAIL $base: no 'bash jobs/mpirun.sh' command in its header"; fails=$((fails+1)); }
  i=0
  for cmd in "${commands[@]}"; do
    i=$((i+1))
    read -r -a words <<<"$cmd"
    run "$base.$i" "${words[@]}"
  done
done
for ds in jobs/recipes/*.json; do
  run "$(basename "$ds" .json)" bash jobs/mpirun.sh -np 2 -- train --config jobs/recipes/default.yaml --deepspeed "$ds"
done

echo "bundled_recipes: $runs runs, $fails failed"
[ $fails -eq 0 ] && [ $runs -ge 6 ]
