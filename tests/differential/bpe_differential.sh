#!/usr/bin/env bash
# Differential check of the BPE tokenizer against Hugging Face `tokenizers`: generates the inputs with
# tests/reference/make_bpe_tokenizer.py (in the venv jobs/install-test-deps.sh builds) into a temp dir
# and compares with shardft_bpe_differential. Fails, never skips, when the venv is missing.
# Usage: bpe_differential.sh random-cases|all-code-points BPE_DIFFERENTIAL_BINARY SOURCE_DIR
#   random-cases     30000 random strings (override: SHARDFT_BPE_RANDOM_COUNT), seed 7 (override:
#                    SHARDFT_BPE_RANDOM_SEED); ids, decodes and span tiling for every fixture tokenizer, and
#                    decodes of random id sequences
#   all-code-points  Split(Isolated) pieces around every Unicode code point, for the three regexes
set -u
mode=$1; bin=$2; src=$3
fail() { echo "FAIL: $*"; exit 1; }
py="$src/.cache/hfvenv/bin/python"
[ -x "$py" ] || fail "$py is missing: run jobs/install-test-deps.sh (it builds .cache/hfvenv with HF tokenizers)"
[ -x "$bin" ] || fail "$bin is missing: build the shardft_bpe_differential target"
gen="$src/tests/reference/make_bpe_tokenizer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/shardft_bpe_differential.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
# ctest counts each case as one core: keep HF's batch encoding on one thread.
export TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1

case "$mode" in
  random-cases)
    # A fixed seed so that a failure reproduces exactly; other seeds explore (see tests/reference/README.md).
    count=${SHARDFT_BPE_RANDOM_COUNT:-30000}; seed=${SHARDFT_BPE_RANDOM_SEED:-7}
    echo "random strings: count $count, seed $seed (reproduce: SHARDFT_BPE_RANDOM_COUNT=$count" \
         "SHARDFT_BPE_RANDOM_SEED=$seed ctest -R bpe_differential.random-cases)"
    "$py" "$gen" --random-cases "$tmp/cases.json" "$count" "$seed" || fail "make_bpe_tokenizer.py --random-cases failed"
    "$bin" random-cases "$tmp/cases.json" || fail "shardft's BPE differs from HF tokenizers on random strings (seed $seed)"
    ;;
  all-code-points)
    "$py" "$gen" --all-code-points "$tmp" || fail "make_bpe_tokenizer.py --all-code-points failed"
    "$bin" all-code-points "$tmp" || fail "shardft's pre-tokenizer regexes differ from HF tokenizers"
    ;;
  *) fail "unknown mode '$mode' (random-cases or all-code-points)" ;;
esac
echo "PASS"
