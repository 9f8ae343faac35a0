#pragma once
// The tokenizer interface the data pipeline uses: the built-in byte tokenizer (the default, for the
// bundled task) and HF tokenizer.json BPE (byte-level: GPT-2 / Llama-3 / Qwen2; SentencePiece style:
// Llama 2 / Mistral / TinyLlama / Phi-3) both implement it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardft {

// The bytes [begin, end) of the encoded text that one token covers: the spans of a text's tokens tile it.
// [hf_begin, hf_end) is the token's offsets as HF's tokenizers reports them (in bytes): whole characters
// (every token inside a character covers all of it) and, where a normalizer composed a character, the
// code point it starts with (the absorbed marks belong to no token). transformers' assistant masks are
// computed from these. Given only begin and end, they are the same.
struct TokenSpan {
  std::size_t begin = 0, end = 0;
  std::size_t hf_begin = begin, hf_end = end;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text` with nothing added around it (HF: add_special_tokens=False). A BPE tokenizer
  // matches its added/special tokens inside the text (never split), as HF does; the byte tokenizer
  // never does. When `spans` is given it receives one byte span per id.
  virtual std::vector<std::int32_t> encode(const std::string& text, std::vector<TokenSpan>* spans = nullptr) const = 0;
  // The ids (and spans) encode gives, but only as far as needed for the first `max_tokens` of them: a
  // tokenizer may stop once it has at least that many, at a point where the ids so far are final (a word
  // boundary), so a huge text that will be truncated costs memory for its kept part only. It may return
  // more than max_tokens ids; fewer only when the whole text has fewer. This default encodes it all.
  virtual std::vector<std::int32_t> encode_prefix(const std::string& text, std::size_t max_tokens,
                                                  std::vector<TokenSpan>* spans = nullptr) const {
    (void)max_tokens;
    return encode(text, spans);
  }
  // Text of the ids; special tokens are written as their content unless skip_special_tokens.
  virtual std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = false) const = 0;
  // Highest id + 1 (the model's embedding needs at least this many rows).
  virtual int vocab_size() const = 0;
  // The id of a special or added token by its content ("<|im_end|>"), -1 when there is none.
  virtual std::int32_t special_token_id(const std::string& content) const = 0;
  // Identifies the tokenizer for logs and cache keys: "byte" or "bpe:<path>:<content hash>".
  virtual std::string fingerprint() const = 0;
};

// "byte" (or ""): the byte tokenizer. Otherwise a tokenizer.json file, or a directory holding one
// (an HF model directory). Throws DataError naming the file and the key for anything unsupported.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name_or_path);

}  // namespace shardft
