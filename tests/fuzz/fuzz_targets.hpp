#pragma once
// The parsers of user-supplied files, each behind one function that takes a file's raw bytes: what the
// libFuzzer harnesses (fuzz_main.cpp) drive and what the unit test test_fuzz_replay.cpp replays the
// committed corpora and regression inputs through.
//
// A target returns true when the input parsed and false when the parser rejected it with one of the
// project's own errors (ConfigError, DataError, FormatError: a message naming the file and key). Anything
// else escapes: another exception type (a std::logic_error thrown here when a parsed result breaks an
// invariant the rest of the program relies on, a std::bad_alloc, a nlohmann or yaml-cpp exception that
// should have been turned into a clear error) is a finding, as is a crash or a sanitizer report.
#include <string>
#include <vector>

namespace shardft::fuzz {

struct Target {
  const char* name;  // also the folder of its inputs: tests/fuzz/corpus/<name>, tests/fuzz/regressions/<name>
  bool (*run)(const std::string& bytes);
};

const std::vector<Target>& targets();
const Target* find_target(const std::string& name);  // nullptr when there is none

}  // namespace shardft::fuzz
