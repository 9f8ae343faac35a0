// Byte-level tokenizer: every UTF-8 byte is its own token, so any text round-trips exactly and no
// vocabulary file is needed. The special tokens sit after the 256 byte ids.
#include <algorithm>
#include <string>
#include <vector>

#include "tokenizer/byte_tokenizer.hpp"

namespace shardft {
namespace {

// Indexed by id - kPad; order must follow the constants in ByteTokenizer.
const char* const kSpecialNames[] = {"<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"};
static_assert(sizeof(kSpecialNames) / sizeof(kSpecialNames[0]) == ByteTokenizer::kVocabSize - ByteTokenizer::kPad,
              "one name per special token");

}  // namespace

std::vector<std::int32_t> ByteTokenizer::encode(const std::string& text, std::vector<TokenSpan>* spans) const {
  return encode_prefix(text, text.size(), spans);
}

std::vector<std::int32_t> ByteTokenizer::encode_prefix(const std::string& text, std::size_t max_tokens,
                                                       std::vector<TokenSpan>* spans) const {
  const std::size_t n = std::min(text.size(), max_tokens);
  // Through unsigned char: plain char is signed on x86, and bytes >= 0x80 must map to 128..255.
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  std::vector<std::int32_t> ids(bytes, bytes + n);
  if (spans) {
    spans->resize(n);
    for (std::size_t i = 0; i < n; ++i) (*spans)[i] = {i, i + 1};
  }
  return ids;
}

std::int32_t ByteTokenizer::special_token_id(const std::string& content) const {
  for (int id = kPad; id < kVocabSize; ++id) {
    if (content == kSpecialNames[id - kPad]) return id;
  }
  return -1;
}

std::string ByteTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  std::string text;
  text.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (id >= 0 && id < kPad) {
      text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
    } else if (id >= kPad && id < kVocabSize) {
      if (!skip_special_tokens) text += kSpecialNames[id - kPad];
    } else {
      // A model whose embedding is padded past kVocabSize can still sample such an id; show it rather
      // than throw in the middle of generation.
      text += "<|unk:" + std::to_string(id) + "|>";
    }
  }
  return text;
}

}  // namespace shardft
