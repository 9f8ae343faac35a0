#!/usr/bin/env bash
# Fine-tune the tiny transformers-made Qwen2, Llama, Qwen3 (q_norm/k_norm, head_dim != hidden/heads),
# Llama 3.2 (llama3 RoPE, tied), yarn Qwen2 and Mistral-Nemo-style head_dim models (tests/reference/hf) at 2 ranks
# (ZeRO-3, chatml / llama3 templates with their BPE tokenizers), consolidate a checkpoint, and load
# the export in transformers: its loss on held-out text equals shardft's eval_loss of the same files
# to 1e-4, and differs from the untrained model's (the weights really moved). The end-of-run
# output_dir is an HF directory too (config.json + tokenizer files, the weights in the source's dtype,
# sharded with an index past max_shard_size), and a bf16 export loads as well.
# Both carry tokenizer_config.json with the run's chat template and generation_config.json: AutoTokenizer's
# apply_chat_template gives the ids the run trained on, and generation stops at the template's end of turn.
# Usage: hf_finetune_export.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
py="$src/.cache/hfvenv/bin/python"
[ -x "$py" ] || fail "$py is missing: run jobs/install-test-deps.sh (jobs/run-tests.sh does)"

head -n 48 jobs/data/sft_train.jsonl > "$tmp/train.jsonl"
cat > "$tmp/text.jsonl" <<'JSONL'
{"text": "upper: hello world -> HELLO WORLD"}
{"text": "Grüße aus Köln, 東京 and 🙂 emoji"}
{"text": "numbers 12345 and    spaces\tand tabs"}
JSONL

# eval_loss of MODEL_DIR (its model.safetensors) on the text samples, from shardft
shardft_eval() {
  "$bin" eval --model_name_or_path "$1" --output_dir "$1" --eval_dataset_path "$tmp/text.jsonl" \
    --chat_template "$2" --max_seq_length 128 > "$tmp/eval.log" 2>&1 || { cat "$tmp/eval.log"; fail "shardft eval $1"; }
  sed -n "s/.*'eval_loss': \([^,}]*\).*/\1/p" "$tmp/eval.log" | tail -1
}
# transformers' loss of MODEL_DIR on the same samples, into $tmp/hf.json (run outside $(...) so that
# a failure ends the script)
hf_loss() {
  "$py" tests/reference/check_hf_export.py "$@" > "$tmp/hf.json" 2> "$tmp/hf.err" \
    || { cat "$tmp/hf.err"; fail "transformers cannot evaluate $1"; }
}
hf_field() { "$py" -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$tmp/hf.json" "$1"; }
rel() { "$py" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(abs(a - b) / abs(b))" "$1" "$2"; }

# The end-of-run export's weight files (the index's, or model.safetensors): "FILES DTYPES TORCH_DTYPE"
export_files() {
  "$py" - "$1" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
index = os.path.join(d, "model.safetensors.index.json")
files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
dtypes = set()
for name in files:
    with open(os.path.join(d, name), "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    header.pop("__metadata__", None)
    dtypes |= {v["dtype"] for v in header.values()}
print(len(files), ",".join(sorted(dtypes)), json.load(open(os.path.join(d, "config.json")))["torch_dtype"])
PY
}

# model, chat template, end / begin token, the architecture transformers must load, learning rate, the
# end-of-run export's shard size
for case in "tiny_qwen2 chatml <|endoftext|> - Qwen2ForCausalLM 3e-3 5GB" \
            "tiny_llama llama3 <|end_of_text|> <|begin_of_text|> LlamaForCausalLM 3e-3 5GB" \
            "tiny_qwen3 chatml <|endoftext|> - Qwen3ForCausalLM 1e-2 5GB" \
            "tiny_llama32 llama3 <|end_of_text|> <|begin_of_text|> LlamaForCausalLM 3e-2 100KB" \
            "tiny_qwen2_yarn chatml <|endoftext|> - Qwen2ForCausalLM 1e-2 5GB" \
            "tiny_headdim plain <|endoftext|> - MistralForCausalLM 1e-2 5GB"; do
  set -- $case
  model=$1 tmpl=$2 end=$3 begin=$4 arch=$5 lr=$6 shard=$7
  [ "$begin" = "-" ] && begin=""
  out="$tmp/$model"
  timeout 300 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train \
    --model_name_or_path "tests/reference/hf/$model" --chat_template "$tmpl" --dataset_path "$tmp/train.jsonl" \
    --max_seq_length 128 --per_device_train_batch_size 4 --max_steps 4 --save_steps 3 --learning_rate "$lr" \
    --lr_scheduler_type constant --logging_steps 1 --zero_stage 3 --do_eval false --output_dir "$out" \
    --max_shard_size "$shard" > "$tmp/$model.train.log" 2>&1 || { cat "$tmp/$model.train.log"; fail "training $model at 2 ranks"; }
  "$bin" consolidate "$out/checkpoint-3" --output "$tmp/$model.export" > /dev/null || fail "consolidate $model"
  for f in config.json tokenizer.json tokenizer_config.json generation_config.json; do
    [ -f "$tmp/$model.export/$f" ] || fail "$model export lacks $f"
    [ -f "$out/$f" ] || fail "$model output_dir lacks $f"
  done
  [ -f "$tmp/$model.export/model.safetensors" ] || fail "$model export lacks model.safetensors"
  # The end of the run exports in the source's dtype (export_dtype auto), sharded past max_shard_size.
  source_dtype=$("$py" -c "import json, sys; print(json.load(open(sys.argv[1]))['torch_dtype'])" \
    "tests/reference/hf/$model/config.json")
  case $source_dtype in float32) tag=F32 ;; bfloat16) tag=BF16 ;; *) fail "$model: unexpected dtype $source_dtype" ;; esac
  read -r files dtypes written < <(export_files "$out") || fail "$model: output_dir's weight files unreadable"
  [ "$dtypes" = "$tag" ] && [ "$written" = "$source_dtype" ] \
    || fail "$model output_dir: weights $dtypes, config.json $written; the source is $source_dtype"
  if [ "$shard" = 5GB ]; then
    [ "$files" = 1 ] && [ -f "$out/model.safetensors" ] || fail "$model output_dir: $files weight files, expected one"
  else
    [ "$files" -gt 1 ] && [ ! -f "$out/model.safetensors" ] || fail "$model output_dir: $files weight files under $shard"
  fi
  echo "ok   $model output_dir: $files weight file(s) in $dtypes, config.json torch_dtype $written"
  # transformers' AutoTokenizer on both: apply_chat_template gives the ids the run trained on.
  cache=$(grep -oE "tokenized dataset (cached in|from cache) [^ ]+\.h5" "$tmp/$model.train.log" | awk '{print $NF}')
  [ -f "$cache" ] || { cat "$tmp/$model.train.log"; fail "$model: no tokenized-set cache named in the log"; }
  case $tmpl in chatml) turn_end="<|im_end|>" ;; llama3) turn_end="<|eot_id|>" ;; *) turn_end=$end ;; esac
  for dir in "$out" "$tmp/$model.export"; do
    "$py" tests/reference/check_hf_chat_template.py "$dir" "$tmp/train.jsonl" "$cache" "$turn_end" > "$tmp/tmpl.json" \
      2> "$tmp/tmpl.err" || { cat "$tmp/tmpl.err"; fail "$model: transformers' chat template on $dir"; }
    echo "ok   $model $(basename "$dir"): AutoTokenizer's apply_chat_template = shardft's ids $(cat "$tmp/tmpl.json")"
  done

  ours=$(shardft_eval "$tmp/$model.export" "$tmpl")
  hf_loss "$tmp/$model.export" "$tmp/text.jsonl" "$end" $begin
  theirs=$(hf_field loss)
  got_arch=$(hf_field architecture)
  [ "$got_arch" = "$arch" ] || fail "$model export loads as $got_arch, expected $arch"
  d=$(rel "$ours" "$theirs")
  "$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1e-4 else 1)" "$d" \
    || fail "$model: shardft eval_loss $ours, transformers $theirs on the export (rel. $d)"
  echo "ok   $model checkpoint-3 export: shardft eval_loss $ours, transformers $theirs (rel. diff $d)"

  hf_loss "tests/reference/hf/$model" "$tmp/text.jsonl" "$end" $begin
  before=$(hf_field loss)
  d0=$(rel "$theirs" "$before")
  "$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) > 1e-3 else 1)" "$d0" \
    || fail "$model: the export's loss $theirs equals the untrained model's $before: did training change the weights?"

  # The end of the run (step 4) is an HF directory as well.
  hf_loss "$out" "$tmp/text.jsonl" "$end" $begin
  final=$(hf_field loss)
  echo "ok   $model output_dir loads in transformers: loss $final (untrained $before)"
done

# bf16 export: transformers loads it; its loss stays within bf16 rounding of the fp32 one.
"$bin" consolidate "$tmp/tiny_qwen2/checkpoint-3" --output "$tmp/bf16" --dtype bf16 > /dev/null || fail "bf16 consolidate"
hf_loss "$tmp/bf16" "$tmp/text.jsonl" "<|endoftext|>"
bf=$(hf_field loss)
hf_loss "$tmp/tiny_qwen2.export" "$tmp/text.jsonl" "<|endoftext|>"
f32=$(hf_field loss)
d=$(rel "$bf" "$f32")
"$py" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 1e-2 else 1)" "$d" || fail "bf16 export loss $bf vs fp32 $f32"
echo "ok   bf16 export loads in transformers: loss $bf vs fp32 $f32"
