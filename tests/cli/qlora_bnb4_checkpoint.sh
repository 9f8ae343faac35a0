#!/usr/bin/env bash
# QLoRA from a bitsandbytes 4-bit save (tests/reference/hf/tiny_llama_bnb4), 2 ranks, ZeRO-3: the run
# equals QLoRA from tiny_llama quantized at load (the same losses and the same adapter file, byte for
# byte), writes its outputs (adapter, merged model.safetensors whose config.json has no
# quantization_config); `consolidate --merge_adapters` and `generate` on the final checkpoint give
# the run's own merged model, over the 4-bit save and over a base quantized at load. A recipe without
# load_in_4bit over the 4-bit base exits 2 naming the folder and keys.
# Usage: qlora_bnb4_checkpoint.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
bnb=tests/reference/hf/tiny_llama_bnb4
head -n 64 jobs/data/sft_train.jsonl > "$tmp/train.jsonl"
args=(--chat_template llama3 --dataset_path "$tmp/train.jsonl" --max_seq_length 128 --per_device_train_batch_size 4
      --max_steps 6 --learning_rate 5e-3 --do_eval false --use_peft true --lora_dropout 0 --lora_target_modules all-linear)
train() {  # NAME BASE EXTRA...
  local name=$1 model=$2; shift 2
  timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train \
    --model_name_or_path "$model" "${args[@]}" --zero_stage 3 --output_dir "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1 \
    || { tail -20 "$tmp/$name.log"; fail "training $name"; }
}
train bnb4 "$bnb" --load_in_4bit true
train plain tests/reference/hf/tiny_llama --load_in_4bit true
losses() { grep -o '"loss":[^,}]*' "$tmp/$1/metrics.jsonl" | tr '\n' ' '; }
[ -n "$(losses bnb4)" ] && [ "$(losses bnb4)" = "$(losses plain)" ] || fail "losses $(losses bnb4) vs $(losses plain)"
cmp -s "$tmp/bnb4/adapter_model.safetensors" "$tmp/plain/adapter_model.safetensors" || fail "the adapters differ"
for f in adapter_config.json adapter_model.safetensors model.safetensors config.json tokenizer.json; do
  [ -s "$tmp/bnb4/$f" ] || fail "no $f in output_dir"
done
! grep -q quantization_config "$tmp/bnb4/config.json" || fail "the merged (full-precision) model's config.json keeps quantization_config"
"$bin" consolidate "$tmp/bnb4/checkpoint-6" --merge_adapters --dtype bf16 --output "$tmp/merged" > "$tmp/merge.log" 2>&1 \
  || { cat "$tmp/merge.log"; fail "consolidate --merge_adapters over the 4-bit base"; }
[ -s "$tmp/merged/model.safetensors" ] && ! grep -q quantization_config "$tmp/merged/config.json" \
  || fail "consolidate --merge_adapters over the 4-bit base: no full-precision model"
# Merging a QLoRA checkpoint's adapter gives the model the run trained and evaluated: the base as its
# model read it (NF4 dequantized), so the final checkpoint merges to the run's own model.safetensors, for
# a 4-bit save and for a base quantized at load alike (the full-precision base would differ by ~1e-2). Both
# bases are bf16, so the runs export bf16 (export_dtype auto), and consolidate is asked for the same.
"$bin" consolidate "$tmp/plain/checkpoint-6" --merge_adapters --dtype bf16 --output "$tmp/merged_plain" > "$tmp/merge_plain.log" 2>&1 \
  || { cat "$tmp/merge_plain.log"; fail "consolidate --merge_adapters of the QLoRA checkpoint"; }
same_tensors() {  # A.safetensors B.safetensors: the same names, dtypes, shapes and bytes (in any order)
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
sys.exit(f"tensors differ: {diff[:5]}" if diff else 0)
PY
}
for run in bnb4 plain; do
  out=$tmp/merged; [ $run = plain ] && out=$tmp/merged_plain
  same_tensors "$out/model.safetensors" "$tmp/$run/model.safetensors" \
    || fail "consolidate --merge_adapters of $run/checkpoint-6 differs from that run's own merged model.safetensors"
done
"$bin" generate --model "$tmp/plain/checkpoint-6" --prompt "upper: abc" --max_new_tokens 6 > "$tmp/gen_ckpt.txt" 2> "$tmp/gen_ckpt.log" \
  && "$bin" generate --model "$tmp/plain" --prompt "upper: abc" --max_new_tokens 6 > "$tmp/gen_out.txt" 2> "$tmp/gen_out.log" \
  || { cat "$tmp/gen_ckpt.log" "$tmp/gen_out.log"; fail "generate on the QLoRA checkpoint / output_dir"; }
grep -q "NF4 matrices as the run read them" "$tmp/gen_ckpt.log" || { cat "$tmp/gen_ckpt.log"; fail "generate merged into the full-precision base"; }
cmp -s "$tmp/gen_ckpt.txt" "$tmp/gen_out.txt" || fail "generate: the QLoRA checkpoint and the run's merged output differ"
"$bin" train --model_name_or_path "$bnb" "${args[@]}" --output_dir "$tmp/x" > "$tmp/bad.log" 2>&1
[ $? -eq 2 ] && grep -q "tiny_llama_bnb4.*load_in_4bit: true and use_peft: true" "$tmp/bad.log" \
  || { cat "$tmp/bad.log"; fail "a LoRA recipe without load_in_4bit over the 4-bit base"; }
echo "ok: QLoRA from the bitsandbytes 4-bit save = QLoRA quantizing at load ($(losses bnb4)); outputs written; merge agrees"
