#!/usr/bin/env bash
# Checkpoints of every format this shardft reads: a new one is format 3 with XXH3-64 digests (the seal,
# every dataset's checksum, the adapter files'); the committed format-2 checkpoints (FNV-1a 64, written by
# an older shardft: tests/reference/checkpoints) still inspect, verify, consolidate and resume, and damage
# in them is still caught.
# Usage: checkpoint_formats.sh SHARDFT_BINARY SOURCE_DIR H5_OFFSET_HELPER
set -u
bin=$1; src=$2; h5_offset=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
ref=tests/reference/checkpoints
tiny=(--config jobs/recipes/default.yaml --hidden_size 16 --num_hidden_layers 1 --num_attention_heads 2
      --num_key_value_heads 1 --intermediate_size 32 --do_eval false --logging_steps 1)

"$bin" inspect "$ref/format2_full" > "$tmp/inspect.log" 2>&1 || { cat "$tmp/inspect.log"; fail "format 2 does not inspect"; }
grep -q "seal ok (fnv1a64:" "$tmp/inspect.log" || { cat "$tmp/inspect.log"; fail "no FNV seal verified"; }
grep -q "checksums ok" "$tmp/inspect.log" || fail "format-2 dataset checksums not verified"
"$bin" inspect "$ref/format2_lora" > "$tmp/lora.log" 2>&1 || { cat "$tmp/lora.log"; fail "format-2 LoRA does not inspect"; }
grep -q "adapter_model.safetensors, adapter_config.json: checksums ok" "$tmp/lora.log" || { cat "$tmp/lora.log"; fail "adapter digests"; }
"$bin" consolidate "$ref/format2_full" --output "$tmp/hf" > "$tmp/cons.log" 2>&1 || { cat "$tmp/cons.log"; fail "consolidate format 2"; }

# Resumed by this shardft: the run goes on from step 2 and its next checkpoint is format 3.
mkdir -p "$tmp/run" && cp -r "$ref/format2_full" "$tmp/run/checkpoint-2"
"$bin" train "${tiny[@]}" --max_steps 4 --save_steps 2 --output_dir "$tmp/run" --resume_from_checkpoint "$tmp/run/checkpoint-2" \
  > "$tmp/resume.log" 2>&1 || { cat "$tmp/resume.log"; fail "resuming a format-2 checkpoint"; }
grep -q "resumed from $tmp/run/checkpoint-2 at step 2" "$tmp/resume.log" || { cat "$tmp/resume.log"; fail "not resumed"; }
grep -q '"format": "shardft-checkpoint-3"' "$tmp/run/checkpoint-4/metadata.json" || fail "the new checkpoint is not format 3"
grep -q '"seal": "xxh3_64:' "$tmp/run/checkpoint-4/metadata.json" || fail "the new seal is not XXH3-64"
"$bin" inspect "$tmp/run/checkpoint-4" > "$tmp/inspect3.log" 2>&1 || { cat "$tmp/inspect3.log"; fail "format 3 does not inspect"; }
grep -q "seal ok (xxh3_64:" "$tmp/inspect3.log" || { cat "$tmp/inspect3.log"; fail "no XXH3 seal verified"; }

# Damage is caught in both formats. One byte of exp_avg_sq's data (format 2: in the dataset's checksum), or
# anywhere in the file (format 3: its whole-file digest is checked before HDF5 opens it, so even damaged
# HDF5 metadata, on which the library itself can crash, is an error message).
damage() {  # FILE OFFSET
  printf '\x5a' | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
expect_caught() {  # DIR WHAT
  "$bin" inspect "$1" > "$tmp/bad.log" 2>&1
  rc=$?
  [ $rc -eq 2 ] || { cat "$tmp/bad.log"; fail "$2: inspect exited $rc, expected 2"; }
  grep -q "checksum mismatch" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "$2: the damage is not named"; }
}
cp -r "$ref/format2_full" "$tmp/bad2"
at=$("$h5_offset" "$tmp/bad2/rank-00000.h5" exp_avg_sq) || fail "no offset of exp_avg_sq"
damage "$tmp/bad2/rank-00000.h5" $((at + 5))
expect_caught "$tmp/bad2" "format 2, a data byte"
for where in data metadata; do
  cp -r "$tmp/run/checkpoint-4" "$tmp/bad3-$where"
  f="$tmp/bad3-$where/rank-00000.h5"
  if [ $where = data ]; then
    at=$("$h5_offset" "$f" exp_avg_sq) || fail "no offset of exp_avg_sq"
    damage "$f" $((at + 5))
  else
    damage "$f" $(( $(stat -c %s "$f") - 200 ))  # HDF5's own structures at the end of the file
  fi
  expect_caught "$tmp/bad3-$where" "format 3, a $where byte"
done
echo "PASS"
