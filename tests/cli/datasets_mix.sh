#!/usr/bin/env bash
# `datasets:` mixing a JSONL file (ShareGPT conversations, one bad line) and a JSON-array file (messages,
# prompt/completion and plain text) with weights, skip_bad_samples, the logged per-file counts, eval on
# a set with plain-text samples, the plain chat template, and the error without skip_bad_samples.
# Usage: datasets_mix.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }

# a.jsonl: 11 records, line 5 is not JSON -> 10 samples
for i in 1 2 3 4; do echo "{\"conversations\":[{\"from\":\"human\",\"value\":\"upper: ab$i\"},{\"from\":\"gpt\",\"value\":\"AB$i\"}]}"; done > "$tmp/a.jsonl"
echo '{"conversations":[{"from":"human","value":"upper: broken"' >> "$tmp/a.jsonl"
for i in 5 6 7 8 9 10; do echo "{\"conversations\":[{\"from\":\"human\",\"value\":\"upper: cd$i\"},{\"from\":\"gpt\",\"value\":\"CD$i\"}]}"; done >> "$tmp/a.jsonl"
# b.json: a JSON array of 8 records in three formats
cat > "$tmp/b.json" <<'EOF'
[
  {"messages": [{"role": "system", "content": "Answer in capitals."}, {"role": "user", "content": "upper: xy"}, {"role": "assistant", "content": "XY"}]},
  {"messages": [{"role": "user", "content": "upper: qr"}, {"role": "assistant", "content": "QR"}], "source": "extra columns are ignored"},
  {"prompt": "upper: mn", "completion": "MN"},
  {"prompt": "upper: op", "completion": "OP"},
  {"text": "plain text takes loss on every token"},
  {"text": "UPPER CASE IS WHAT THIS MODEL WRITES"},
  {"prompt": "upper: st", "completion": "ST"},
  {"messages": [{"role": "user", "content": "upper: uv"}, {"role": "assistant", "content": "UV"}]}
]
EOF
cat > "$tmp/recipe.yaml" <<EOF
datasets:
  - {path: $tmp/a.jsonl, weight: 2.0}
  - path: $tmp/b.json
    weight: 0.5
skip_bad_samples: true
eval_dataset_path: $tmp/b.json
EOF

"$bin" train --config "$tmp/recipe.yaml" --max_steps 3 --logging_steps 1 --per_device_train_batch_size 4 \
  --eval_max_new_tokens 4 --output_dir "$tmp/run" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "train exited non-zero"; }
cat "$tmp/train.log"
want() { grep -qF -- "$1" "$tmp/train.log" || fail "log lacks: $1"; }
want "tokenizer byte (262 ids), chat template shardft (stop: <|end|>; pad id 256)"
want "dataset $tmp/a.jsonl: 11 records, 10 samples, 1 skipped; weight 2.0 -> 20 samples"
want "dataset $tmp/b.json: 8 records, 8 samples; weight 0.5 -> 4 samples"
want "datasets mixed: 24 training samples from 2 files"
want "skipped 1 bad record of $tmp/a.jsonl:"
want "$tmp/a.jsonl:5: not valid JSON"
want ", 24 samples,"
grep -qE "^\{'loss': [0-9.e+-]+" "$tmp/train.log" || fail "no loss line"
grep -qE "^\{'eval_loss': [0-9.e+-]+, 'eval_exact_match': [0-9.e+-]+, 'eval_samples': 8" "$tmp/train.log" || fail "no eval line over the 8 eval records"
[ -s "$tmp/run/model.safetensors" ] || fail "no model.safetensors"

# The same data through the plain template (no markers: prompt, answer, end of text).
"$bin" train --config "$tmp/recipe.yaml" --chat_template plain --max_steps 1 --per_device_train_batch_size 4 \
  --do_eval false --output_dir "$tmp/plain" > "$tmp/plain.log" 2>&1 || { cat "$tmp/plain.log"; fail "plain template run failed"; }
grep -qF "chat template plain (stop: <|end|>; pad id 256)" "$tmp/plain.log" || { cat "$tmp/plain.log"; fail "plain template not used"; }

# An HF byte-level BPE tokenizer.json with the Qwen2 (chatml) template, eval included.
"$bin" train --config "$tmp/recipe.yaml" --tokenizer_name_or_path tests/reference/bpe/qwen2_style/tokenizer.json \
  --chat_template chatml --vocab_size 1536 --max_seq_length 128 --max_steps 2 --per_device_train_batch_size 4 \
  --eval_max_new_tokens 3 --output_dir "$tmp/qwen" > "$tmp/qwen.log" 2>&1 || { cat "$tmp/qwen.log"; fail "chatml + BPE run failed"; }
grep -qE "^tokenizer bpe:.*qwen2_style/tokenizer.json.* \(1503 ids\), chat template chatml \(stop: <\|im_end\|> <\|endoftext\|>; pad id 1500\)" \
  "$tmp/qwen.log" || { cat "$tmp/qwen.log"; fail "chatml + BPE tokenizer not reported"; }
grep -qE "^\{'eval_loss': [0-9.e+-]+, 'eval_exact_match': [0-9.e+-]+, 'eval_samples': 8" "$tmp/qwen.log" || { cat "$tmp/qwen.log"; fail "no chatml eval"; }

# Without skip_bad_samples the bad line stops the run, naming file:line.
out=$("$bin" train --config "$tmp/recipe.yaml" --skip_bad_samples false --max_steps 1 --output_dir "$tmp/strict" 2>&1) \
  && fail "a bad line without skip_bad_samples was accepted"
grep -qF "$tmp/a.jsonl:5: not valid JSON" <<<"$out" || { echo "$out"; fail "the error does not name a.jsonl:5"; }
# A template the tokenizer cannot serve is named with both.
out=$("$bin" train --config "$tmp/recipe.yaml" --chat_template chatml --max_steps 1 --output_dir "$tmp/chatml" 2>&1) \
  && fail "chatml with the byte tokenizer was accepted"
grep -qF "chat_template chatml needs the token <|im_start|>, which the tokenizer byte does not have" <<<"$out" \
  || { echo "$out"; fail "no clear error for chatml with the byte tokenizer"; }

# Samples cut at max_seq_length are counted per file; a set where no answer survives is an error.
long=$(printf 'x%.0s' $(seq 1 200))
{
  echo '{"prompt": "upper: ab", "completion": "AB"}'
  echo "{\"prompt\": \"upper: $long\", \"completion\": \"LONG\"}"
  echo "{\"prompt\": \"upper: $long\", \"completion\": \"LONGER\"}"
} > "$tmp/long.jsonl"
"$bin" train --dataset_path "$tmp/long.jsonl" --max_seq_length 64 --max_steps 1 --per_device_train_batch_size 3 \
  --do_eval false --dataset_cache_dir "" --output_dir "$tmp/long" > "$tmp/long.log" 2>&1 || { cat "$tmp/long.log"; fail "run with long samples failed"; }
grep -qF "dataset $tmp/long.jsonl: 2 of 3 samples truncated to max_seq_length 64, 2 with no target token left" "$tmp/long.log" \
  || { cat "$tmp/long.log"; fail "truncated samples not counted"; }
tail -n 2 "$tmp/long.jsonl" > "$tmp/all_long.jsonl"
out=$("$bin" train --dataset_path "$tmp/all_long.jsonl" --max_seq_length 64 --max_steps 1 --per_device_train_batch_size 2 \
  --do_eval false --output_dir "$tmp/all_long" 2>&1); code=$?
[ $code -eq 2 ] || { echo "$out"; fail "a training set with no target token: exit $code, expected 2"; }
grep -qF "the training set (2 samples) has no target token: every answer lies past max_seq_length 64" <<<"$out" \
  || { echo "$out"; fail "no clear error for a set with no target token"; }
# An evaluation set whose answers all lie past max_seq_length: an error before training, not eval_loss 0.
out=$("$bin" train --dataset_path "$tmp/long.jsonl" --eval_dataset_path "$tmp/all_long.jsonl" --max_seq_length 64 \
  --max_steps 1 --per_device_train_batch_size 1 --do_eval true --output_dir "$tmp/eval_long" 2>&1); code=$?
[ $code -eq 2 ] || { echo "$out"; fail "an evaluation set with no target token: exit $code, expected 2"; }
grep -qF "$tmp/all_long.jsonl: the evaluation set (2 samples) has no target token" <<<"$out" \
  || { echo "$out"; fail "no clear error for an evaluation set with no target token"; }
[ ! -e "$tmp/eval_long/metrics.jsonl" ] || fail "the run trained before refusing its evaluation set"
echo "datasets_mix: ok"
