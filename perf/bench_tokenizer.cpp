// Tokenization throughput on 12,000 deterministic chat-shaped samples (~2.6 MB): each is a Qwen2-style
// conversation, <|im_start|>user\n ... <|im_end|>\n<|im_start|>assistant\n ... <|im_end|>\n, whose turns
// are a bundled sft sample (jobs/data/sft_train.jsonl) and 1-12 random lines of the multilingual BPE
// corpus (tests/reference/bpe/corpus.txt: English, accents, CJK, Arabic, emoji, code, whitespace runs).
//
// "bytes_per_second" is input text per second (decode: output text), "items_per_second" samples per
// second, "tokens_per_second" ids per second. The BPE tokenizers are the committed fixtures of
// tests/reference/bpe/ (the Llama 2 ones see the Qwen2 markers as plain text). `encode` runs with the
// word cache warm (the steady state of a long run: the first iteration fills it); `encode_cold` loads a
// fresh tokenizer before each pass (outside the timing), so every distinct word goes through the merge
// loop once.
#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/bpe_tokenizer.hpp"
#include "data/sft_data.hpp"

namespace shardft::perf {
namespace {

constexpr std::size_t kSamples = 12000;

std::string bpe_dir(const std::string& style) {
  return std::string(SHARDFT_SOURCE_DIR) + "/tests/reference/bpe/" + style;
}

const std::vector<std::string>& samples() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> lines, sft;
    std::ifstream corpus(std::string(SHARDFT_SOURCE_DIR) + "/tests/reference/bpe/corpus.txt", std::ios::binary);
    for (std::string line; std::getline(corpus, line);) lines.push_back(line + "\n");
    std::ifstream jsonl(std::string(SHARDFT_SOURCE_DIR) + "/jobs/data/sft_train.jsonl");
    for (std::string line; std::getline(jsonl, line);) {
      if (line.empty()) continue;
      std::string text;
      for (const auto& turn : nlohmann::json::parse(line)["conversations"])
        text += turn["value"].get<std::string>() + "\n";
      sft.push_back(text);
    }
    if (lines.empty() || sft.empty())
      throw std::runtime_error("bench_tokenizer: corpus.txt or sft_train.jsonl missing");
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::size_t> line(0, lines.size() - 1), count(1, 12);
    std::vector<std::string> out;
    out.reserve(kSamples);
    for (std::size_t i = 0; i < kSamples; ++i) {
      std::string user = sft[i % sft.size()], assistant;
      for (std::size_t k = count(rng); k > 0; --k) (k % 2 ? assistant : user) += lines[line(rng)];
      out.push_back("<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n" + assistant + "<|im_end|>\n");
    }
    return out;
  }();
  return all;
}

double total_bytes(const std::vector<std::string>& texts) {
  double n = 0;
  for (const auto& t : texts) n += static_cast<double>(t.size());
  return n;
}

void report(benchmark::State& st, double bytes, double tokens) {
  const auto iters = static_cast<double>(st.iterations());
  st.SetBytesProcessed(static_cast<std::int64_t>(bytes * iters));
  st.SetItemsProcessed(static_cast<std::int64_t>(kSamples * iters));
  st.counters["tokens_per_second"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
}

void encode_all(benchmark::State& st, const Tokenizer& tok, bool with_spans) {
  const auto& texts = samples();
  std::vector<TokenSpan> spans;
  double tokens = 0;
  for (const auto& t : texts) tokens += static_cast<double>(tok.encode(t).size());  // also warms the cache
  for (auto _ : st) {
    for (const auto& t : texts) benchmark::DoNotOptimize(tok.encode(t, with_spans ? &spans : nullptr));
  }
  report(st, total_bytes(texts), tokens);
}

void bpe_encode(benchmark::State& st, const std::string& style, bool with_spans) {
  const auto tok = load_bpe_tokenizer(bpe_dir(style));
  encode_all(st, *tok, with_spans);
}

void bpe_encode_cold(benchmark::State& st, const std::string& style) {
  const auto& texts = samples();
  double tokens = 0;
  for (auto _ : st) {
    st.PauseTiming();
    auto tok = load_bpe_tokenizer(bpe_dir(style));
    st.ResumeTiming();
    tokens = 0;
    for (const auto& t : texts) tokens += static_cast<double>(tok->encode(t).size());
  }
  report(st, total_bytes(texts), tokens);
}

void byte_encode(benchmark::State& st) {
  const ByteTokenizer tok;
  encode_all(st, tok, false);
}

void bpe_decode(benchmark::State& st, const std::string& style) {
  const auto tok = load_bpe_tokenizer(bpe_dir(style));
  std::vector<std::vector<std::int32_t>> ids;
  double tokens = 0;
  for (const auto& t : samples()) {
    ids.push_back(tok->encode(t));
    tokens += static_cast<double>(ids.back().size());
  }
  for (auto _ : st) {
    for (const auto& v : ids) benchmark::DoNotOptimize(tok->decode(v));
  }
  report(st, total_bytes(samples()), tokens);
}

const bool registered = [] {
  const auto reg = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMillisecond);
  };
  for (const std::string style : {"qwen2_style", "llama3_style", "gpt2_style"}) {
    const std::string base = "tokenizer/bpe_" + style.substr(0, style.find('_')) + "/";
    reg(base + "encode/12k_samples", [style](benchmark::State& st) { bpe_encode(st, style, false); });
  }
  reg("tokenizer/bpe_qwen2/encode_spans/12k_samples",
      [](benchmark::State& st) { bpe_encode(st, "qwen2_style", true); });
  reg("tokenizer/bpe_qwen2/encode_cold/12k_samples", [](benchmark::State& st) { bpe_encode_cold(st, "qwen2_style"); });
  reg("tokenizer/bpe_qwen2/decode/12k_samples", [](benchmark::State& st) { bpe_decode(st, "qwen2_style"); });
  // SentencePiece style: Llama 2's legacy layout (the whole text between added tokens is one word) and the
  // non-legacy Metaspace one.
  reg("tokenizer/bpe_llama2_legacy/encode/12k_samples",
      [](benchmark::State& st) { bpe_encode(st, "llama2_legacy_style", false); });
  reg("tokenizer/bpe_llama2_metaspace/encode/12k_samples",
      [](benchmark::State& st) { bpe_encode(st, "llama2_metaspace_style", false); });
  reg("tokenizer/bpe_llama2_legacy/decode/12k_samples",
      [](benchmark::State& st) { bpe_decode(st, "llama2_legacy_style"); });
  reg("tokenizer/byte/encode/12k_samples", byte_encode);
  return true;
}();

}  // namespace
}  // namespace shardft::perf
