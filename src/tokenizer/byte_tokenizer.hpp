#pragma once
// The built-in tokenizer of the bundled task: one id per byte and six special tokens.
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace shardft {

// Byte-level tokenizer: ids 0..255 are the bytes, then the special tokens.
class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int kPad = 256;
  static constexpr int kBos = 257;
  static constexpr int kEnd = 258;        // ends every turn; generation stops on it
  static constexpr int kSystem = 259;
  static constexpr int kUser = 260;
  static constexpr int kAssistant = 261;
  static constexpr int kVocabSize = 262;

  // Never matches special tokens inside text: "<|end|>" in a user's message stays seven bytes.
  std::vector<std::int32_t> encode(const std::string& text, std::vector<TokenSpan>* spans = nullptr) const override;
  // One id per byte: the first max_tokens bytes.
  std::vector<std::int32_t> encode_prefix(const std::string& text, std::size_t max_tokens,
                                          std::vector<TokenSpan>* spans = nullptr) const override;
  // Special tokens are rendered as "<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>".
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens = false) const override;
  int vocab_size() const override { return kVocabSize; }
  std::int32_t special_token_id(const std::string& content) const override;
  std::string fingerprint() const override { return "byte"; }
};

}  // namespace shardft
