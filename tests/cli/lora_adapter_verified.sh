#!/usr/bin/env bash
# A LoRA checkpoint's adapter files are part of what its seal protects: metadata.json records the
# digests of adapter_model.safetensors and adapter_config.json, so an edited lora_alpha (8 -> 80) or a
# lora_B value scaled by 1e30 makes consolidate --merge_adapters, generate, eval and inspect stop with exit 2
# naming the file, instead of exporting a wrong model. An adapter folder given with --adapter (no
# checkpoint around it) is checked for finite values, and a lora_alpha that overflows the merged weights
# is refused. Resuming with another lora_alpha is refused: it would rescale what the adapter learned.
# `shardft eval` of a LoRA checkpoint evaluates its base with the adapter merged.
# Usage: lora_adapter_verified.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
base=tests/reference/hf/tiny_llama

head -n 16 jobs/data/sft_train.jsonl > "$tmp/train.jsonl"
train() {
  timeout 300 "$bin" train --model_name_or_path "$base" --chat_template llama3 --dataset_path "$tmp/train.jsonl" \
    --max_seq_length 128 --per_device_train_batch_size 4 --save_steps 2 --learning_rate 3e-3 \
    --lr_scheduler_type constant --do_eval false --output_dir "$tmp/run" --use_peft true --lora_r 4 --lora_alpha 8 \
    --lora_dropout 0 "$@"
}
train --max_steps 2 > "$tmp/train.log" 2>&1 || { tail -20 "$tmp/train.log"; fail "LoRA training"; }
ck="$tmp/run/checkpoint-2"
"$bin" inspect "$ck" > "$tmp/inspect.log" 2>&1 || { cat "$tmp/inspect.log"; fail "inspect of an intact LoRA checkpoint"; }
grep -qF "LoRA adapter (r 4, lora_alpha 8): adapter_model.safetensors, adapter_config.json: checksums ok" "$tmp/inspect.log" \
  || { cat "$tmp/inspect.log"; fail "inspect does not report the adapter's checksums"; }
"$bin" consolidate "$ck" --merge_adapters --output "$tmp/merged" > "$tmp/merge.log" 2>&1 \
  || { cat "$tmp/merge.log"; fail "merge of an intact LoRA checkpoint"; }
# eval of a LoRA checkpoint: its base with the adapter merged, as generate opens it
"$bin" eval --output_dir "$ck" --eval_dataset_path "$tmp/train.jsonl" --max_seq_length 128 --eval_samples 4 \
  > "$tmp/eval.log" 2>&1 || { cat "$tmp/eval.log"; fail "eval of a LoRA checkpoint"; }
grep -aqF "is a LoRA checkpoint; its base is $base" "$tmp/eval.log" && grep -aq "'eval_loss': " "$tmp/eval.log" \
  || { cat "$tmp/eval.log"; fail "eval of a LoRA checkpoint did not evaluate the base with its adapter"; }

# exit 2 and the message from each of: merge, generate, inspect
refused() {  # DIR WANT
  "$bin" consolidate "$1" --merge_adapters --output "$tmp/out-$RANDOM" > "$tmp/r.log" 2>&1
  [ $? -eq 2 ] && grep -qF -- "$2" "$tmp/r.log" || { cat "$tmp/r.log"; fail "merge of $1: want exit 2 and '$2'"; }
  "$bin" generate --model "$1" --chat_template llama3 --max_seq_length 128 --prompt "upper: hi" --max_new_tokens 4 \
    > "$tmp/r.log" 2>&1
  [ $? -eq 2 ] && grep -qF -- "$2" "$tmp/r.log" || { cat "$tmp/r.log"; fail "generate of $1: want exit 2 and '$2'"; }
}

# 1. lora_alpha edited 8 -> 80 in the checkpoint
cp -r "$ck" "$tmp/alpha"
python3 - "$tmp/alpha/adapter_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["lora_alpha"] = 80; json.dump(c, open(sys.argv[1], "w"))
PY
refused "$tmp/alpha" "$tmp/alpha/adapter_config.json: checksum"
"$bin" eval --output_dir "$tmp/alpha" --eval_dataset_path "$tmp/train.jsonl" --max_seq_length 128 > "$tmp/r.log" 2>&1
[ $? -eq 2 ] && grep -qF "$tmp/alpha/adapter_config.json: checksum" "$tmp/r.log" || { cat "$tmp/r.log"; fail "eval of the edited alpha"; }
"$bin" inspect "$tmp/alpha" > "$tmp/r.log" 2>&1
[ $? -eq 2 ] && grep -qF "$tmp/alpha/adapter_config.json: checksum" "$tmp/r.log" || { cat "$tmp/r.log"; fail "inspect of the edited alpha"; }

# 2. one lora_B value scaled by 1e30 in the checkpoint's safetensors
scale_b() {  # FILE FACTOR: the first element of the first lora_B tensor times FACTOR (nan: set to NaN)
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
path, factor = sys.argv[1], sys.argv[2]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = sorted(k for k in header if k.endswith("lora_B.weight"))[0]
at = 8 + n + header[name]["data_offsets"][0]
value = struct.unpack("<f", data[at:at + 4])[0]
new = float("nan") if factor == "nan" else (value if value != 0 else 1.0) * float(factor)
data[at:at + 4] = struct.pack("<f", new)
open(path, "wb").write(data)
PY
}
cp -r "$ck" "$tmp/scaled"
scale_b "$tmp/scaled/adapter_model.safetensors" 1e30
refused "$tmp/scaled" "$tmp/scaled/adapter_model.safetensors: checksum"

# 3. an adapter folder outside a checkpoint (no digests): a NaN is refused, naming the tensor
mkdir "$tmp/nan"
cp "$ck/adapter_model.safetensors" "$ck/adapter_config.json" "$tmp/nan/"
scale_b "$tmp/nan/adapter_model.safetensors" nan
"$bin" generate --model "$base" --adapter "$tmp/nan" --chat_template llama3 --max_seq_length 128 --prompt "upper: hi" \
  --max_new_tokens 4 > "$tmp/r.log" 2>&1
[ $? -eq 2 ] && grep -q "lora_B.weight' holds nan at element 0: an adapter must be finite" "$tmp/r.log" \
  || { cat "$tmp/r.log"; fail "generate --adapter with a NaN"; }
"$bin" consolidate "$tmp/nan" --merge_adapters --base "$base" --output "$tmp/x" > "$tmp/r.log" 2>&1
[ $? -eq 2 ] && grep -q "an adapter must be finite" "$tmp/r.log" || { cat "$tmp/r.log"; fail "merge of a NaN adapter"; }

# 4. lora_alpha 1e300: finite, but the merged weights are not
mkdir "$tmp/huge"
cp "$ck/adapter_model.safetensors" "$ck/adapter_config.json" "$tmp/huge/"
python3 - "$tmp/huge/adapter_config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["lora_alpha"] = 1e300; json.dump(c, open(sys.argv[1], "w"))
PY
"$bin" consolidate "$tmp/huge" --merge_adapters --base "$base" --output "$tmp/y" > "$tmp/r.log" 2>&1
[ $? -eq 2 ] && grep -q "lora_alpha or the adapter's values are out of range" "$tmp/r.log" \
  || { cat "$tmp/r.log"; fail "merge with lora_alpha 1e300"; }
[ ! -e "$tmp/y/model.safetensors" ] || fail "the refused merge wrote model.safetensors"

# 5. training from an adapter folder whose lora_B values are finite but huge: the non-finite step names
# the LoRA parameter and the adapter folder it came from
mkdir "$tmp/huge_b"
cp "$ck/adapter_model.safetensors" "$ck/adapter_config.json" "$tmp/huge_b/"
python3 - "$tmp/huge_b/adapter_model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
for name, h in json.loads(data[8:8 + n]).items():
    if name.endswith("lora_B.weight"):
        a, b = h["data_offsets"]
        data[8 + n + a:8 + n + b] = struct.pack("<f", 3e38) * ((b - a) // 4)
open(path, "wb").write(data)
PY
timeout 300 "$bin" train --model_name_or_path "$base" --chat_template llama3 --dataset_path "$tmp/train.jsonl" \
  --max_seq_length 128 --per_device_train_batch_size 4 --max_steps 2 --do_eval false --output_dir "$tmp/from_huge" \
  --use_peft true --lora_r 4 --adapter "$tmp/huge_b" > "$tmp/r.log" 2>&1 && fail "training from a huge adapter succeeded"
grep -q "is not finite.*lora_.*started from adapter_path '$tmp/huge_b'" "$tmp/r.log" \
  || { tail -3 "$tmp/r.log"; fail "the non-finite step does not name the adapter folder"; }

# 6. resuming with another lora_alpha
train --max_steps 4 --lora_alpha 80 --resume_from_checkpoint "$ck" > "$tmp/r.log" 2>&1
[ $? -eq 2 ] && grep -qF "trained with lora_alpha 8; this run has lora_alpha 80: resuming would change the adapter's scale" "$tmp/r.log" \
  || { tail -5 "$tmp/r.log"; fail "resume with another lora_alpha"; }
train --max_steps 4 --resume_from_checkpoint "$ck" > "$tmp/r.log" 2>&1 || { tail -5 "$tmp/r.log"; fail "resume with the same lora_alpha"; }
echo "ok"
