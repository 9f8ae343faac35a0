// Packing on 12,000 chat samples: first-fit-decreasing rows of max_seq_length, its time, and the
// packing efficiency (real tokens / (rows x max_seq_length), counter "efficiency") beside the padding
// efficiency of the same samples batched unpacked (each batch of 8 padded to its longest, counter
// "unpacked_efficiency"). The samples are conversations of 1-6 turns, each a line of the bundled
// sft data or of the BPE corpus (tests/reference/bpe/corpus.txt), rendered with chatml and
// tokenized with the committed Qwen2-style BPE tokenizer, so the lengths spread like real chat data.
#include <benchmark/benchmark.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "data/packing.hpp"
#include "tokenizer/tokenizer.hpp"

namespace shardft::perf {
namespace {

constexpr std::size_t kSamples = 12000;

const std::vector<TokenizedSample>& samples(int max_len) {
  static std::map<int, std::vector<TokenizedSample>> by_len;
  auto& out = by_len[max_len];
  if (!out.empty()) return out;
  std::vector<std::string> lines;
  std::ifstream corpus(std::string(SHARDFT_SOURCE_DIR) + "/tests/reference/bpe/corpus.txt", std::ios::binary);
  for (std::string line; std::getline(corpus, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  std::ifstream jsonl(std::string(SHARDFT_SOURCE_DIR) + "/jobs/data/sft_train.jsonl");
  for (std::string line; std::getline(jsonl, line);) {
    if (line.empty()) continue;
    for (const auto& turn : nlohmann::json::parse(line)["conversations"]) lines.push_back(turn["value"]);
  }
  const auto tok = load_tokenizer(std::string(SHARDFT_SOURCE_DIR) + "/tests/reference/bpe/qwen2_style");
  const ChatEncoder enc(*tok, chat_template_for(ChatTemplateKind::chatml, *tok));
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::size_t> pick(0, lines.size() - 1), pairs(1, 3), extra(0, 8);
  for (std::size_t i = 0; i < kSamples; ++i) {
    Conversation conv;
    for (std::size_t p = pairs(rng); p > 0; --p) {
      std::string user = lines[pick(rng)], answer = lines[pick(rng)];
      for (std::size_t k = extra(rng); k > 0; --k) answer += "\n" + lines[pick(rng)];
      conv.push_back({"user", user});
      conv.push_back({"assistant", answer});
    }
    out.push_back(enc.encode(conv, max_len));
  }
  return out;
}

void BM_PackFirstFitDecreasing(benchmark::State& st) {
  const int max_len = static_cast<int>(st.range(0));
  const auto& s = samples(max_len);
  std::vector<std::vector<std::int64_t>> rows;
  for (auto _ : st) {
    rows = pack_first_fit_decreasing(s, max_len);
    benchmark::DoNotOptimize(rows.data());
  }
  double real = 0, unpacked_slots = 0;
  for (std::size_t b = 0; b < s.size(); b += 8) {  // unpacked: batches of 8 in data order
    std::size_t longest = 0;
    for (std::size_t i = b; i < std::min(s.size(), b + 8); ++i) {
      longest = std::max(longest, s[i].input_ids.size());
      real += static_cast<double>(s[i].input_ids.size());
    }
    unpacked_slots += static_cast<double>(longest * std::min<std::size_t>(8, s.size() - b));
  }
  st.counters["samples"] = static_cast<double>(s.size());
  st.counters["rows"] = static_cast<double>(rows.size());
  st.counters["efficiency"] = packing_efficiency(s, rows, max_len);
  st.counters["unpacked_efficiency"] = real / unpacked_slots;
  st.counters["mean_sample_tokens"] = real / static_cast<double>(s.size());
  st.SetItemsProcessed(st.iterations() * static_cast<std::int64_t>(s.size()));
}
BENCHMARK(BM_PackFirstFitDecreasing)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardft::perf
