#!/usr/bin/env bash
# `shardft generate` on a briefly trained default-task model ("upper: abc" -> "ABC"): greedy answers to
# held-out prompts from jobs/data/sft_eval.jsonl (the same as `eval` scores), the same without the KV cache,
# from the output_dir, the final checkpoint and through --config; prompts files in the dataset formats;
# seeded sampling that repeats, with and without the cache; bad input that fails with a message naming
# the flag or file.
# Usage: generate.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
export OPENBLAS_NUM_THREADS=1

# 1200 steps with a 200-step warmup learn the task (exact match 0.99-1.0 over seeds) in ~20 s of one core.
t0=$SECONDS
"$bin" train --config jobs/recipes/default.yaml --max_steps 1200 --warmup_steps 200 --logging_steps 400 \
  --eval_samples 20 --output_dir "$tmp/run" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "train exited non-zero"; }
echo "trained in $((SECONDS - t0)) s"
head -20 jobs/data/sft_eval.jsonl > "$tmp/heldout.jsonl"

# Held-out prompts, greedy: each line has the prompt, the generation and the reference.
t0=$SECONDS
"$bin" generate --model "$tmp/run" --prompts_file "$tmp/heldout.jsonl" > "$tmp/gen.jsonl" 2> "$tmp/gen.err" \
  || { cat "$tmp/gen.err"; fail "generate --prompts_file exited non-zero"; }
echo "generated 20 answers in $((SECONDS - t0)) s"
cat "$tmp/gen.err"
python3 - "$tmp/gen.jsonl" "$tmp/run/metrics.jsonl" <<'PY' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 20, f"expected 20 lines, got {len(lines)}"
exact = 0
for i, l in enumerate(lines):
    assert l["index"] == i and l["prompt"][-1]["role"] == "user", l
    assert l["finish_reason"] in ("stop", "length", "context"), l
    exact += l["generation"] == l["reference"]
    print(f'  {l["prompt"][-1]["content"]!r} -> {l["generation"]!r} (reference {l["reference"]!r}, {l["finish_reason"]})')
eval_em = json.loads(open(sys.argv[2]).readlines()[-1])["eval_exact_match"]
print(f"exact match {exact}/20; training's eval on the same 20: {eval_em}")
assert exact >= 18, f"only {exact}/20 held-out prompts answered correctly"
assert abs(exact / 20 - eval_em) < 1e-9, "generate and eval disagree on the same prompts"
PY

# Without the KV cache (HF's use_cache=False) every token re-runs the whole sequence: the same answers.
"$bin" generate --model "$tmp/run" --prompts_file "$tmp/heldout.jsonl" --use_cache false > "$tmp/gen_nocache.jsonl" \
  2> "$tmp/gen_nocache.err" || { cat "$tmp/gen_nocache.err"; fail "generate --use_cache false exited non-zero"; }
cmp -s "$tmp/gen.jsonl" "$tmp/gen_nocache.jsonl" || { diff "$tmp/gen.jsonl" "$tmp/gen_nocache.jsonl" | head; fail "--use_cache false answers otherwise"; }
grep -q "no KV cache" "$tmp/gen_nocache.err" || fail "the log does not say that the cache is off"
rate() { sed -n 's/.*(\([0-9.]*\) tokens\/s.*/\1/p' "$1"; }
echo "use_cache false: the same 20 answers; $(rate "$tmp/gen.err") tokens/s with the KV cache, $(rate "$tmp/gen_nocache.err") without"

# --prompt prints the completion alone on stdout; from the output_dir, the final checkpoint and via --config.
for i in 0 5 11; do
  prompt=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[$i])['prompt'][-1]['content'])" "$tmp/gen.jsonl")
  want=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[$i])['generation'])" "$tmp/gen.jsonl")
  ref=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[$i])['reference'])" "$tmp/gen.jsonl")
  got=$("$bin" generate --model "$tmp/run" --prompt "$prompt" 2> "$tmp/p.err") || { cat "$tmp/p.err"; fail "generate --prompt exited non-zero"; }
  [ "$got" = "$want" ] || fail "--prompt '$prompt' gives '$got', the prompts file gave '$want'"
  [ "$got" = "$ref" ] || echo "note: '$prompt' -> '$got' (reference '$ref')"
  got=$("$bin" generate --model "$tmp/run/checkpoint-1200" --prompt "$prompt" 2> "$tmp/c.err") \
    || { cat "$tmp/c.err"; fail "generate from the checkpoint exited non-zero"; }
  [ "$got" = "$want" ] || fail "the checkpoint answers '$prompt' with '$got', the output_dir with '$want'"
  got=$("$bin" generate --config jobs/recipes/default.yaml --output_dir "$tmp/run" --prompt "$prompt" 2> "$tmp/p.err") \
    || { cat "$tmp/p.err"; fail "generate --config exited non-zero"; }
  [ "$got" = "$want" ] || fail "--config answers '$prompt' with '$got', expected '$want'"
  echo "  --prompt '$prompt' -> '$got' (output_dir, checkpoint-1200, --config)"
done
grep -q "checkpoint $tmp/run/checkpoint-1200 (step 1200)" "$tmp/c.err" || { cat "$tmp/c.err"; fail "the log does not name the checkpoint"; }

# Other record formats; a conversation ending with the user has no reference; max_new_tokens cuts.
cat > "$tmp/formats.jsonl" <<'EOF'
{"messages": [{"role": "user", "content": "upper: qzx"}]}
{"prompt": "upper: mop"}
{"prompt": "upper: kit", "completion": "KIT"}
EOF
"$bin" generate --model "$tmp/run" --prompts_file "$tmp/formats.jsonl" --max_new_tokens 2 > "$tmp/formats.out" 2> "$tmp/f.err" \
  || { cat "$tmp/f.err"; fail "generate on the formats file exited non-zero"; }
python3 - "$tmp/formats.out" <<'PY' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 3, lines
assert "reference" not in lines[0] and "reference" not in lines[1] and lines[2]["reference"] == "KIT", lines
for l in lines:
    assert l["new_tokens"] == 2 and l["finish_reason"] == "length" and len(l["generation"]) == 2, l
print("formats ok:", [l["generation"] for l in lines])
PY

# Sampling: the same seed gives the same text; across seeds a hot temperature varies.
p="upper: abcdefgh"
a=$("$bin" generate --model "$tmp/run" --prompt "$p" --temperature 1.0 --top_p 0.9 --top_k 20 --seed 7 2>/dev/null) || fail "sampling exited non-zero"
b=$("$bin" generate --model "$tmp/run" --prompt "$p" --temperature 1.0 --top_p 0.9 --top_k 20 --seed 7 2>/dev/null) || fail "sampling exited non-zero"
[ "$a" = "$b" ] || fail "the same seed sampled '$a' and then '$b'"
c=$("$bin" generate --model "$tmp/run" --prompt "$p" --temperature 1.0 --top_p 0.9 --top_k 20 --seed 7 --use_cache false 2>/dev/null) \
  || fail "sampling without the cache exited non-zero"
[ "$a" = "$c" ] || fail "seed 7 sampled '$a' with the KV cache and '$c' without"
distinct=$(for s in 1 2 3 4 5 6; do "$bin" generate --model "$tmp/run" --prompt "$p" --temperature 3 --seed $s --max_new_tokens 12 2>/dev/null; echo; done | sort -u | wc -l)
[ "$distinct" -ge 2 ] || fail "temperature 3 gave the same text for 6 seeds"
echo "sampling ok: seed 7 -> '$a' twice; temperature 3 over 6 seeds -> $distinct distinct texts"

# Bad input: a non-zero exit and a message that names the flag or the file.
expect_error() {
  local name=$1 want=$2; shift 2
  local out code
  out=$("$bin" generate "$@" 2>&1); code=$?
  [ $code -ne 0 ] || fail "$name: exit code 0"
  grep -qF -- "$want" <<<"$out" || { echo "$out" | head -5; fail "$name: output lacks '$want'"; }
  echo "ok   $name (exit $code): $(grep -F -- "$want" <<<"$out" | head -1)"
}
m=(--model "$tmp/run")
expect_error temperature "--temperature: expected a number >= 0 (0: greedy), got -1" "${m[@]}" --prompt hi --temperature -1
expect_error temperature-text "--temperature: expected a number, got 'hot'" "${m[@]}" --prompt hi --temperature hot
expect_error top_p "--top_p: expected a number in (0, 1], got 1.5" "${m[@]}" --prompt hi --top_p 1.5
expect_error top_k "--top_k: expected an integer >= 0, got 'x'" "${m[@]}" --prompt hi --top_k x
expect_error max_new_tokens "--max_new_tokens: expected an integer >= 1, got '0'" "${m[@]}" --prompt hi --max_new_tokens 0
expect_error seed "--seed: expected an integer >= 0, got '-3'" "${m[@]}" --prompt hi --seed -3
expect_error use_cache "--use_cache: expected true or false, got 'maybe'" "${m[@]}" --prompt hi --use_cache maybe
expect_error no-value "--prompt: expected a value after it" "${m[@]}" --prompt
expect_error no-input "give exactly one of --prompt TEXT, --prompts_file FILE or --interactive" "${m[@]}"
expect_error two-inputs "more than one input" "${m[@]}" --prompt hi --prompts_file "$tmp/heldout.jsonl"
expect_error no-model "--model: '$tmp/nothing' is not a directory" --model "$tmp/nothing" --prompt hi
mkdir -p "$tmp/empty"
expect_error empty-dir "--model: '$tmp/empty' holds no model" --model "$tmp/empty" --prompt hi
expect_error no-output-dir "output_dir: '$tmp/none' is not a directory" --output_dir "$tmp/none" --prompt hi
expect_error missing-file "--prompts_file: cannot open dataset '$tmp/missing.jsonl'" "${m[@]}" --prompts_file "$tmp/missing.jsonl"
printf '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": oops}\n' > "$tmp/bad.jsonl"
expect_error bad-record "--prompts_file: $tmp/bad.jsonl:2: not valid JSON" "${m[@]}" --prompts_file "$tmp/bad.jsonl"
expect_error unknown-key "unknown key 'tempreature'" "${m[@]}" --prompt hi --tempreature 1
expect_error too-long "the context limit is 64 (max_seq_length)" "${m[@]}" --prompt "upper: $(printf 'a%.0s' {1..80})"
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  out=$(timeout 60 mpirun -np 2 --oversubscribe --bind-to none "$bin" generate "${m[@]}" --prompt hi 2>&1) \
    && fail "generate under 2 ranks succeeded"
  grep -qF "generate runs in one process, not 2 ranks" <<<"$out" || { echo "$out" | head; fail "2 ranks: no clear message"; }
  echo "ok   two-ranks: $(grep -F "one process" <<<"$out" | head -1)"
fi
echo "generate: ok"
