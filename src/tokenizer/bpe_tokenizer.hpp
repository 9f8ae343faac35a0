#pragma once
// Hugging Face tokenizer.json BPE, encoding and decoding exactly as the `tokenizers` library does with
// add_special_tokens=False, in two families: byte-level (GPT-2, Llama 3, Qwen2: a ByteLevel pre-tokenizer
// and decoder) and SentencePiece style (Llama 2, Mistral, TinyLlama, Phi-3: Unicode characters as
// symbols, byte fallback, the metaspace "▁"). A file is byte-level when its pre-tokenizer or decoder is
// ByteLevel.
//
// Supported, anything else is a DataError naming the file, the JSON key and what is supported:
//   model          BPE: vocab, merges ("a b" strings or [a, b] pairs), ignore_merges, unk_token/fuse_unk;
//                  dropout null (or 0), no continuing_subword_prefix / end_of_word_suffix; byte_fallback
//                  (<0xNN> tokens for characters not in the vocab) in SentencePiece style only
//   normalizer     null, NFC, Prepend, Replace (String pattern), or a Sequence of them
//   pre_tokenizer  byte-level: ByteLevel (add_prefix_space, use_regex with the GPT-2 regex), or a Sequence
//                  of Split steps (Regex or String pattern, behavior Isolated, invert false) ending in
//                  ByteLevel. SentencePiece style: null, Metaspace (replacement, prepend_scheme always /
//                  first / never or the older add_prefix_space, split), or Split steps before it
//   decoder        byte-level: ByteLevel (alone or as the only step of a Sequence). SentencePiece style:
//                  null, Replace (String pattern), ByteFallback, Fuse, Strip, Metaspace, or a Sequence
//   post_processor null, ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing or a Sequence of
//                  them; never applied (the chat template adds BOS itself)
//   added_tokens   matched in the text before pre-tokenization, leftmost-longest, never split; special
//                  and non-special; normalized=false ones in the raw text, normalized=true ones (their
//                  content normalized too) in the normalized text (as HF does); lstrip / rstrip /
//                  single_word as HF applies them
//
// Regexes run on PCRE2 (UTF + UCP, JIT when available) with the tokenizer.json pattern as written,
// except that \s and \S are spelled out as Unicode White_Space so that they match what Oniguruma (HF's
// regex engine) matches: PCRE2 also counts U+180E as \s.
//
// Spans (Tokenizer::encode's byte spans) tile the input: spans[0].begin == 0, each span begins where the
// previous one ended, the last ends at text.size(). A token that is part of a UTF-8 character gets just
// its bytes. An added token with lstrip / rstrip covers the whitespace it swallowed; a space the
// ByteLevel pre-tokenizer prepends (add_prefix_space), or a "▁" that Prepend or Metaspace inserts, covers
// no bytes of the input; a "▁" that replaced a space covers that space. Where NFC changed the text, a span
// edge that falls inside a recomposed run of characters is moved to the end of that run in the original
// text (so such a token may get an empty span). A character the model cannot encode at all (no vocab
// token, no byte tokens, no unk token) is dropped, as HF drops it; its bytes go to the next token's span.
//
// Text must be valid UTF-8 (HF takes Python strings, which always are): encode throws DataError otherwise.
// decode skips ids that name no token (as HF does). Byte-level: invalid UTF-8 in the decoded bytes becomes
// U+FFFD (Rust's String::from_utf8_lossy rules); ByteFallback: a run of byte tokens that is not valid
// UTF-8 becomes one U+FFFD per byte (as HF's decoder does).
//
// encode is safe to call from several threads at once; the pre-token cache is used by one caller at a
// time (the others encode without it).
#include <memory>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace shardft {

// Loads a tokenizer.json file, or the tokenizer.json inside a directory (an HF model directory).
std::unique_ptr<Tokenizer> load_bpe_tokenizer(const std::string& path);
// The same for a tokenizer.json's content already in memory; `file` names it in messages.
std::unique_ptr<Tokenizer> parse_bpe_tokenizer(const std::string& content, const std::string& file);

}  // namespace shardft
