// Replays every committed fuzz input (tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/)
// through the same entry points the libFuzzer harnesses drive (tests/fuzz/fuzz_targets.hpp), in the
// ordinary build: each input parses or is rejected with the project's own error; any other exception is
// a failure naming the file. Seed inputs are valid examples and must parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_targets.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_in(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// true: parsed, false: rejected cleanly; an unexpected exception is reported and counted as neither.
struct Outcome {
  bool parsed = false;
  std::string unexpected;  // what() of an exception that is not one of the expected errors
};

Outcome replay(const shardft::fuzz::Target& t, const fs::path& input) {
  Outcome o;
  try {
    o.parsed = t.run(bytes_of(input));
  } catch (const std::exception& e) {
    o.unexpected = e.what();
    if (o.unexpected.empty()) o.unexpected = "(exception with an empty message)";
  } catch (...) {
    o.unexpected = "(exception of a type not derived from std::exception)";
  }
  return o;
}

const fs::path kFuzzDir = fs::path(SHARDFT_SOURCE_DIR) / "tests" / "fuzz";

TEST(FuzzReplay, EverySeedParses) {
  for (const auto& t : shardft::fuzz::targets()) {
    const auto seeds = inputs_in(kFuzzDir / "corpus" / t.name);
    EXPECT_FALSE(seeds.empty()) << "no seed inputs in tests/fuzz/corpus/" << t.name;
    for (const fs::path& p : seeds) {
      const Outcome o = replay(t, p);
      EXPECT_TRUE(o.unexpected.empty()) << p << ": " << o.unexpected;
      EXPECT_TRUE(o.parsed || !o.unexpected.empty()) << p << ": a seed input is rejected";
    }
  }
}

TEST(FuzzReplay, EveryRegressionInputIsHandled) {
  int n = 0;
  for (const auto& t : shardft::fuzz::targets()) {
    for (const fs::path& p : inputs_in(kFuzzDir / "regressions" / t.name)) {
      ++n;
      const Outcome o = replay(t, p);
      EXPECT_TRUE(o.unexpected.empty()) << p << ": " << o.unexpected;
    }
  }
  std::cout << "replayed " << n << " regression inputs\n";
}

TEST(FuzzReplay, TargetsTellParsedFromRejected) {
  const auto* t = shardft::fuzz::find_target("jsonl");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->run(std::string("\0{\"text\": \"a\"}", 14)));
  EXPECT_FALSE(t->run(std::string("\0{\"text\": 1}", 12)));  // a DataError: rejected cleanly
  EXPECT_EQ(shardft::fuzz::find_target("nonesuch"), nullptr);
}

}  // namespace
