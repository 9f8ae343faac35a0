#!/usr/bin/env bash
# chat_template: auto (the default) picks up a model directory's own Jinja template: a copy of the tiny
# Qwen2 model with a tokenizer_config.json (one of the test templates) trains one step and evaluates
# with it, the logs name the template, where it came from and its end-of-turn stop token; without a
# chat_template in tokenizer_config.json the default is the built-in shardft template as before.
# Usage: chat_template_auto.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

mkdir "$tmp/model"
cp tests/reference/hf/tiny_qwen2/* "$tmp/model/"
python3 - "$tmp/model/tokenizer_config.json" tests/reference/jinja/chatml_generation.jinja <<'PY'
import json, sys
template = open(sys.argv[2], encoding="utf-8").read()
json.dump({"chat_template": template, "bos_token": None,
           "eos_token": {"content": "<|im_end|>", "special": True}}, open(sys.argv[1], "w"))
PY
head -n 16 jobs/data/sft_train.jsonl > "$tmp/train.jsonl"

"$bin" train --model_name_or_path "$tmp/model" --dataset_path "$tmp/train.jsonl" --max_seq_length 128 \
  --per_device_train_batch_size 4 --max_steps 1 --do_eval false --output_dir "$tmp/out" > "$tmp/train.log" 2>&1 \
  || { cat "$tmp/train.log"; fail "training with the model's own template"; }
want="chat template jinja $tmp/model/tokenizer_config.json: chat_template"
grep -qF "$want" "$tmp/train.log" || { cat "$tmp/train.log"; fail "the train log does not name the template: $want"; }
grep -qF "[auto: the chat_template of $tmp/model/tokenizer_config.json] (stop: <|im_end|>;" "$tmp/train.log" \
  || { cat "$tmp/train.log"; fail "the train log does not say how the template was chosen or its stop token"; }

"$bin" eval --model_name_or_path "$tmp/model" --output_dir "$tmp/model" --eval_dataset_path "$tmp/train.jsonl" \
  --max_seq_length 128 --eval_samples 4 > "$tmp/eval.log" 2>&1 || { cat "$tmp/eval.log"; fail "eval with the model's own template"; }
grep -qF "$want" "$tmp/eval.log" || { cat "$tmp/eval.log"; fail "the eval log does not name the template"; }

# No chat_template in tokenizer_config.json: the old default (shardft), which this tokenizer cannot do.
echo '{"eos_token": "<|im_end|>"}' > "$tmp/model/tokenizer_config.json"
out=$("$bin" train --model_name_or_path "$tmp/model" --dataset_path "$tmp/train.jsonl" --max_seq_length 128 \
  --per_device_train_batch_size 4 --max_steps 1 --do_eval false --output_dir "$tmp/out2" 2>&1) \
  && fail "the shardft template trained with a tokenizer that lacks its tokens"
grep -qF "chat_template shardft needs the token <|bos|>" <<<"$out" || { echo "$out"; fail "unexpected error"; }
echo "ok"
