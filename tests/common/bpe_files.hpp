#pragma once
// Reading, editing and loading tokenizer.json files in the BPE unit tests: the reference fixtures
// under tests/reference/bpe, edited copies written to a per-process scratch directory, and the
// DataError a file gets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/bpe_tokenizer.hpp"
#include "data/sft_data.hpp"

namespace shardft {
namespace testing_util {

inline const std::string& bpe_reference_dir() {
  static const std::string dir = std::string(SHARDFT_REFERENCE_DIR) + "/bpe/";
  return dir;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::json load_json(const std::string& path) { return nlohmann::json::parse(read_text(path)); }

// `j` written as `name` in this process's scratch directory; returns its path.
inline std::string write_json(const std::string& name, const nlohmann::json& j) {
  const std::string d = ::testing::TempDir() + "shardft_bpe_" + std::to_string(::getpid()) + "/";
  std::filesystem::create_directories(d);
  std::ofstream(d + name, std::ios::binary) << j.dump();
  return d + name;
}

// The DataError loading `path` gives, or "(no error)".
inline std::string bpe_load_error(const std::string& path) {
  try {
    load_bpe_tokenizer(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace testing_util
}  // namespace shardft
