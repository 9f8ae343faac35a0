// Picks the tokenizer a run names: the built-in byte tokenizer or an HF tokenizer.json.
#include "tokenizer/tokenizer.hpp"

#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/byte_tokenizer.hpp"

namespace shardft {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name_or_path) {
  if (name_or_path.empty() || name_or_path == "byte") return std::make_unique<ByteTokenizer>();
  return load_bpe_tokenizer(name_or_path);
}

}  // namespace shardft
