// The tokenized training set and its cache: a second run with the same data, tokenizer, template and
// length reads the cache and gets exactly the samples (and packing rows) the first one made; any
// change to what decides the set (a byte of a data file, the length, the template) misses it; a
// damaged cache file is rebuilt. And the O(n log n) first-fit packing equals the plain first-fit scan.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "data/packing.hpp"
#include "data/training_set.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {
namespace fs = std::filesystem;

class TrainingSetCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shardft_tsc_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream data(dir_ / "train.jsonl");
    for (int i = 0; i < 40; ++i) {
      data << R"({"messages": [{"role": "user", "content": "upper: )" << std::string(1 + i % 7, char('a' + i % 26))
           << R"("}, {"role": "assistant", "content": ")" << std::string(1 + i % 7, char('A' + i % 26)) << "\"}]}\n";
    }
    cfg_.dataset_path = (dir_ / "train.jsonl").string();
    cfg_.dataset_cache_dir = (dir_ / "cache").string();
    cfg_.max_seq_length = 32;
  }
  void TearDown() override { fs::remove_all(dir_); }

  TrainingSet build(std::string* log_text = nullptr) {
    const ChatEncoder enc(tok_, resolve_chat_template(cfg_.chat_template, cfg_.tokenizer_name_or_path, tok_));
    std::ostringstream log;
    TrainingSet set = build_training_set(training_set_config(cfg_), enc, tok_.fingerprint(), true, log);
    if (log_text) *log_text = log.str();
    return set;
  }
  std::size_t cache_files() const {
    std::size_t n = 0;
    if (fs::exists(dir_ / "cache")) {
      for (const auto& e : fs::directory_iterator(dir_ / "cache")) n += e.path().extension() == ".h5";
    }
    return n;
  }

  fs::path dir_;
  TrainConfig cfg_;
  ByteTokenizer tok_;
};

void expect_same(const TrainingSet& a, const TrainingSet& b) {
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].input_ids, b.samples[i].input_ids) << i;
    EXPECT_EQ(a.samples[i].labels, b.samples[i].labels) << i;
  }
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.report, b.report);
}

TEST_F(TrainingSetCache, SecondBuildReadsTheCacheAndGetsTheSameSet) {
  for (bool packing : {false, true}) {
    SCOPED_TRACE(packing ? "packing" : "no packing");
    cfg_.packing = packing;
    std::string log1, log2;
    const TrainingSet first = build(&log1);
    EXPECT_FALSE(first.from_cache);
    EXPECT_NE(log1.find("tokenized 40 samples"), std::string::npos) << log1;
    EXPECT_NE(log1.find("cached in"), std::string::npos) << log1;
    EXPECT_EQ(first.rows.empty(), !packing);
    const TrainingSet second = build(&log2);
    EXPECT_TRUE(second.from_cache);
    EXPECT_NE(log2.find("from cache"), std::string::npos) << log2;
    EXPECT_NE(log2.find("40 samples"), std::string::npos) << log2;  // the data report is replayed
    expect_same(first, second);
  }
  EXPECT_EQ(cache_files(), 2u);  // packing is part of the key
}

TEST_F(TrainingSetCache, AnyChangeToWhatDecidesTheSetMissesTheCache) {
  const TrainingSet base = build();
  cfg_.max_seq_length = 16;
  EXPECT_FALSE(build().from_cache);
  cfg_.max_seq_length = 32;
  cfg_.chat_template = "plain";
  EXPECT_FALSE(build().from_cache);
  cfg_.chat_template = "shardft";
  EXPECT_TRUE(build().from_cache);
  {  // one byte of the data file: the first answer "A" becomes "B"
    std::ifstream in(dir_ / "train.jsonl");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text[text.find("\"A\"") + 1] = 'B';
    std::ofstream(dir_ / "train.jsonl", std::ios::trunc) << text;
  }
  const TrainingSet changed = build();
  EXPECT_FALSE(changed.from_cache);
  EXPECT_EQ(cache_files(), 4u);
}

TEST_F(TrainingSetCache, DamagedCacheFileIsRebuilt) {
  const TrainingSet first = build();
  ASSERT_EQ(cache_files(), 1u);
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) fs::resize_file(e.path(), fs::file_size(e.path()) / 2);
  const TrainingSet again = build();
  EXPECT_FALSE(again.from_cache);
  expect_same(first, again);
  EXPECT_TRUE(build().from_cache);  // and the rewritten file is good
}

TEST_F(TrainingSetCache, EmptyCacheDirTurnsCachingOff) {
  cfg_.dataset_cache_dir = "";
  EXPECT_FALSE(build().from_cache);
  EXPECT_FALSE(build().from_cache);
  EXPECT_EQ(cache_files(), 0u);
}

// The plain first-fit scan the tree replaces, as the reference.
std::vector<std::vector<std::int64_t>> first_fit_scan(const std::vector<TokenizedSample>& s, int max_len) {
  std::vector<std::int64_t> order(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return s[a].input_ids.size() > s[b].input_ids.size(); });
  std::vector<std::vector<std::int64_t>> rows;
  std::vector<std::int64_t> room;
  for (std::int64_t i : order) {
    const auto len = static_cast<std::int64_t>(s[i].input_ids.size());
    std::size_t r = 0;
    while (r < rows.size() && room[r] < len) ++r;
    if (r == rows.size()) {
      rows.emplace_back();
      room.push_back(max_len);
    }
    rows[r].push_back(i);
    room[r] -= len;
  }
  return rows;
}

TEST(PackingTree, EqualsThePlainFirstFitScan) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    const int max_len = 16 + static_cast<int>(rng() % 200);
    std::vector<TokenizedSample> s(1 + rng() % 3000);
    for (auto& x : s) x.input_ids.resize(1 + rng() % (max_len + 8));  // some longer than a row
    EXPECT_EQ(pack_first_fit_decreasing(s, max_len), first_fit_scan(s, max_len)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace shardft
