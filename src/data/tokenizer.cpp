// Picks the tokenizer a run names: the built-in byte tokenizer or an HF tokenizer.json.
#include "data/tokenizer.hpp"

#include "data/bpe_tokenizer.hpp"
#include "data/sft_data.hpp"

namespace shardft {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& name_or_path) {
  if (name_or_path.empty() || name_or_path == "byte") return std::make_unique<ByteTokenizer>();
  return load_bpe_tokenizer(name_or_path);
}

}  // namespace shardft
