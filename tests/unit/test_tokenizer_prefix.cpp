// Tokenizer::encode_prefix: the ids and spans encode gives, only as far as needed for the first
// max_tokens (a huge text that truncation cuts costs memory for its kept part only). For every tokenizer
// style the fixtures hold, over the BPE test corpus: the prefix's ids and spans are the whole encoding's
// first ones, at least max_tokens of them (or all), and far fewer than the whole for a small max_tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/sft_data.hpp"
#include "tokenizer/tokenizer.hpp"

namespace shardft {
namespace {

const std::string kBpeDir = std::string(SHARDFT_REFERENCE_DIR) + "/bpe/";

std::string corpus() {
  std::ifstream in(kBpeDir + "corpus.txt", std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void expect_prefix_of_whole(const Tokenizer& tok, const std::string& text, const std::string& name) {
  std::vector<TokenSpan> all_spans;
  const std::vector<std::int32_t> all = tok.encode(text, &all_spans);
  ASSERT_GT(all.size(), 100u) << name;
  for (const std::size_t max_tokens : {std::size_t{1}, std::size_t{7}, std::size_t{64}, all.size() - 1, all.size(),
                                       all.size() + 5}) {
    SCOPED_TRACE(name + ", max_tokens " + std::to_string(max_tokens));
    std::vector<TokenSpan> spans;
    const std::vector<std::int32_t> ids = tok.encode_prefix(text, max_tokens, &spans);
    ASSERT_GE(ids.size(), std::min(max_tokens, all.size()));
    ASSERT_LE(ids.size(), all.size());
    ASSERT_EQ(spans.size(), ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) {
      ASSERT_EQ(ids[k], all[k]) << "id " << k;
      ASSERT_EQ(spans[k].begin, all_spans[k].begin) << "span " << k;
      ASSERT_EQ(spans[k].end, all_spans[k].end) << "span " << k;
      ASSERT_EQ(spans[k].hf_begin, all_spans[k].hf_begin) << "span " << k;
      ASSERT_EQ(spans[k].hf_end, all_spans[k].hf_end) << "span " << k;
    }
    if (max_tokens <= 64) {
      EXPECT_LT(ids.size(), all.size() / 2) << "it did not stop early";
    }
  }
}

TEST(TokenizerPrefix, IsTheWholeEncodingsStartForEveryStyle) {
  const std::string text = corpus();
  for (const char* style : {"gpt2_style", "llama3_style", "qwen2_style", "llama2_legacy_style", "llama2_metaspace_style",
                            "edge_style", "spm_edge_style", "spm_never_style"}) {
    expect_prefix_of_whole(*load_tokenizer(kBpeDir + style), text, style);
  }
  expect_prefix_of_whole(ByteTokenizer(), text, "byte");
}

}  // namespace
}  // namespace shardft
