#pragma once
// The pre-token probes shared by the BPE unit tests and the differential check against HF
// (tests/reference/make_bpe_tokenizer.py writes the expected side).
#include <cstddef>
#include <string>
#include <vector>

#include "tokenizer/bpe_internal.hpp"

namespace shardft {
namespace testing_util {

// Byte lengths of the Split(Isolated) pieces of text, the form the fixtures store.
inline std::vector<std::size_t> split_lengths(const bpe::Regex& re, const std::string& text) {
  std::vector<bpe::Range> pieces;
  re.split_isolated(text, 0, pieces);
  std::vector<std::size_t> lens;
  for (const bpe::Range& r : pieces) lens.push_back(r.end - r.begin);
  return lens;
}

// The generator's PROBE_CONTEXT.format(c=chr(cp)): every "{c}" of the context replaced by the code point.
inline std::string probe_text(const std::string& context, char32_t cp) {
  std::string c, out;
  bpe::append_utf8(cp, c);
  for (std::size_t at = 0;;) {
    const std::size_t k = context.find("{c}", at);
    out += context.substr(at, k - at);
    if (k == std::string::npos) return out;
    out += c;
    at = k + 3;
  }
}

}  // namespace testing_util
}  // namespace shardft
