// TensorBoard event files (io/tensorboard_events.hpp) and the run's metrics log (train/run_metrics.hpp):
// CRC32C against the published check values, TFRecord framing and Event protobufs byte for byte against
// hand-encoded ones, a written file read back record by record with every CRC checked, HF's tags, and
// the default folder. tests/cli/tensorboard_report.sh reads a run's files with TensorBoard's own reader.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "config/train_config.hpp"
#include "io/tensorboard_events.hpp"
#include "train/run_metrics.hpp"

namespace shardft {
namespace {

std::uint64_t le(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

std::string bytes_of(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

template <class T>
std::string raw(T v) {
  std::string s(sizeof v, '\0');
  std::memcpy(s.data(), &v, sizeof v);
  return s;
}

TEST(TensorBoardEvents, Crc32cMatchesThePublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xe3069283u);              // the CRC catalogue's check value
  EXPECT_EQ(crc32c(std::string(32, '\0').data(), 32), 0x8a9136aau);  // RFC 3720, B.4: 32 bytes of zeros
  EXPECT_EQ(crc32c(std::string(32, '\xff').data(), 32), 0x62a8ab43u);  // ... and of ones
  EXPECT_EQ(crc32c("56789", 5, crc32c("1234", 4)), 0xe3069283u) << "continuing a CRC";
  const std::uint32_t c = crc32c("abc", 3);
  EXPECT_EQ(masked_crc32c("abc", 3), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoardEvents, RecordsAndEventsAreEncodedByteForByte) {
  const std::string data = "hello";
  const std::string rec = tfrecord(data);
  ASSERT_EQ(rec.size(), 8 + 4 + data.size() + 4);
  EXPECT_EQ(le(rec, 0, 8), data.size());
  EXPECT_EQ(le(rec, 8, 4), masked_crc32c(rec.data(), 8));
  EXPECT_EQ(rec.substr(12, data.size()), data);
  EXPECT_EQ(le(rec, 12 + data.size(), 4), masked_crc32c(data.data(), data.size()));

  // Event { wall_time: 1.5, file_version: "brain.Event:2" }
  EXPECT_EQ(file_version_event(1.5), bytes_of({0x09}) + raw(1.5) + bytes_of({0x1a, 13}) + "brain.Event:2");
  // Event { wall_time: 1.5, step: 300, summary { value { tag: "train/loss", simple_value: 0.25 } } }
  const std::string value = bytes_of({0x0a, 10}) + "train/loss" + bytes_of({0x15}) + raw(0.25f);
  const std::string summary = bytes_of({0x0a, static_cast<int>(value.size())}) + value;
  EXPECT_EQ(scalars_event(1.5, 300, {{"train/loss", 0.25}}),
            bytes_of({0x09}) + raw(1.5) + bytes_of({0x10, 0xac, 0x02}) + bytes_of({0x2a, static_cast<int>(summary.size())}) +
                summary);
}

TEST(TensorBoardEvents, AWrittenFileReadsBackRecordByRecord) {
  const std::string dir = ::testing::TempDir() + "tb_events/nested";
  std::filesystem::remove_all(dir);
  std::string path;
  {
    EventFileWriter w(dir);
    path = w.path();
    w.add_scalars(1, {{"train/loss", 2.5}, {"train/learning_rate", 1e-3}});
    w.add_scalars(2, {{"train/loss", 2.0}});
  }
  EXPECT_NE(std::filesystem::path(path).filename().string().find("events.out.tfevents."), std::string::npos) << path;
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  for (std::size_t at = 0; at < file.size();) {
    ASSERT_LE(at + 12, file.size());
    const std::size_t n = le(file, at, 8);
    ASSERT_EQ(le(file, at + 8, 4), masked_crc32c(file.data() + at, 8));
    ASSERT_LE(at + 16 + n, file.size());
    ASSERT_EQ(le(file, at + 12 + n, 4), masked_crc32c(file.data() + at + 12, n));
    records.push_back(file.substr(at + 12, n));
    at += 16 + n;
  }
  ASSERT_EQ(records.size(), 3u);
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_EQ(records[1].substr(9), scalars_event(0, 1, {{"train/loss", 2.5}, {"train/learning_rate", 1e-3}}).substr(9))
      << "the same event apart from its wall time";
  EXPECT_EQ(records[2].substr(9), scalars_event(0, 2, {{"train/loss", 2.0}}).substr(9));
  EXPECT_THROW(EventFileWriter(path + "/under_a_file"), std::runtime_error);
}

TEST(RunMetrics, TagsFollowHfsTensorBoardCallback) {
  const nlohmann::json record{{"step", 10}, {"loss", 1.5}, {"eval_loss", 2.0}, {"eval_exact_match", 0.5},
                              {"note", "text"}, {"preempted", true}};
  const Scalars s = tensorboard_scalars(record);
  const Scalars expected = {{"eval/exact_match", 0.5}, {"eval/loss", 2.0}, {"train/loss", 1.5}};
  EXPECT_EQ(s, expected);
}

TEST(RunMetrics, TheDefaultFolderIsHfsOrTheRunName) {
  const std::string dir = default_logging_dir("out", "");
  EXPECT_TRUE(std::regex_match(dir, std::regex(R"(out/runs/[A-Z][a-z]{2}\d\d_\d\d-\d\d-\d\d_.+)"))) << dir;
  EXPECT_EQ(default_logging_dir("out", "sft-1"), "out/runs/sft-1");
}

TEST(RunMetrics, WritesTheJsonlAlwaysAndEventsWhenAsked) {
  const std::string out = ::testing::TempDir() + "metrics_log_run";
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  {
    RunMetrics none({out, "none", "", "", false});
    none.add({{"step", 1}, {"loss", 1.0}}, 1);
    EXPECT_EQ(none.tensorboard_dir(), "");
  }
  EXPECT_FALSE(std::filesystem::exists(out + "/runs")) << "report_to none writes no events";
  {
    RunMetrics both({out, "tensorboard", "", "named", true});
    both.add({{"step", 2}, {"loss", 0.5}}, 2);
    EXPECT_EQ(both.tensorboard_dir(), out + "/runs/named");
  }
  std::ifstream jsonl(out + "/metrics.jsonl");
  std::string first, second;
  std::getline(jsonl, first);
  std::getline(jsonl, second);
  EXPECT_EQ(nlohmann::json::parse(first)["step"], 1);
  EXPECT_EQ(nlohmann::json::parse(second)["step"], 2) << "a resumed log appends";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(out + "/runs/named")) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  RunMetrics inactive;
  inactive.add({{"step", 3}}, 3);  // ranks other than the writer: nothing happens
  EXPECT_THROW(RunMetrics({out + "/missing/dir", "none", "", "", false}), ConfigError);
}

}  // namespace
}  // namespace shardft
