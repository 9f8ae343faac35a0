// Differential check of data/bpe_tokenizer against Hugging Face `tokenizers` on inputs generated at
// test time by tests/reference/make_bpe_tokenizer.py (run by tests/differential/bpe_differential.sh):
//
//   shardft_bpe_differential random-cases FILE    FILE from `make_bpe_tokenizer.py --random-cases FILE N SEED`:
//                                                 ids, decode and decode(skip_special) of every string, for
//                                                 every fixture tokenizer, the spans tile each string; and
//                                                 decode of random id sequences
//   shardft_bpe_differential all-code-points DIR  DIR from `make_bpe_tokenizer.py --all-code-points DIR`:
//                                                 HF's Split(Isolated) piece lengths around every code point,
//                                                 for the three regexes of tests/reference/bpe/pretokens.json
//
// Prints the first mismatches and a count per tokenizer / regex; exits 1 on any mismatch or on input
// that is not what the generator writes (missing keys, wrong counts), 2 on bad usage.
#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/bpe_internal.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "data/sft_data.hpp"
#include "tests/common/bpe_probes.hpp"

namespace {

using json = nlohmann::json;
using Ids = std::vector<std::int32_t>;
using shardft::Tokenizer;
using shardft::TokenSpan;
namespace bpe = shardft::bpe;

const std::string kBpeDir = std::string(SHARDFT_REFERENCE_DIR) + "/bpe/";
const char* const kStyles[] = {"gpt2_style",          "llama3_style",           "qwen2_style",    "edge_style",
                               "llama2_legacy_style", "llama2_metaspace_style", "spm_edge_style", "spm_never_style"};
constexpr std::size_t kShown = 10;  // mismatches printed per tokenizer / regex

json load_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// JSON with non-ASCII escaped: the differences are often invisible (combining marks, Unicode spaces).
std::string shown(const std::string& text) {
  std::string s = json(text).dump(-1, ' ', true, json::error_handler_t::replace);
  return s.size() > 160 ? s.substr(0, 157) + "..." : s;
}

std::string shown(const Ids& ids) { return json(ids).dump(); }

// The spans of an encoding tile the text: each begins where the last ended, the last ends at the end.
bool spans_tile(const std::vector<TokenSpan>& spans, std::size_t n_ids, std::size_t text_size) {
  if (spans.size() != n_ids) return false;
  std::size_t at = 0;
  for (const TokenSpan& s : spans) {
    if (s.begin != at || s.end < s.begin) return false;
    at = s.end;
  }
  return at == text_size;
}

int random_cases(const std::string& file) {
  const json doc = load_json(file);
  const auto texts = doc.at("texts").get<std::vector<std::string>>();
  std::cout << file << ": " << texts.size() << " strings, seed " << doc.value("seed", json()).dump() << "\n";
  if (texts.empty()) {
    std::cout << "FAIL: no strings\n";
    return 1;
  }
  std::size_t total_bad = 0;
  for (const char* style : kStyles) {
    const std::unique_ptr<Tokenizer> tok = shardft::load_bpe_tokenizer(kBpeDir + style);
    const json& hf = doc.at(style);
    const json &ids = hf.at("ids"), &decoded = hf.at("decoded"), &skipped = hf.at("decoded_skip_special");
    if (ids.size() != texts.size() || decoded.size() != texts.size() || skipped.size() != texts.size()) {
      std::cout << "FAIL: " << style << ": " << ids.size() << " / " << decoded.size() << " / " << skipped.size()
                << " results for " << texts.size() << " strings\n";
      return 1;
    }
    std::size_t bad = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const Ids want = ids[i];
      std::vector<TokenSpan> spans;
      const Ids got = tok->encode(texts[i], &spans);
      const std::string got_decoded = tok->decode(want), got_skipped = tok->decode(want, true);
      std::string what;
      if (got != want) what += "\n    ids:  HF " + shown(want) + "\n          us " + shown(got);
      if (got_decoded != decoded[i].get<std::string>())
        what += "\n    decode:  HF " + shown(decoded[i].get<std::string>()) + "\n             us " + shown(got_decoded);
      if (got_skipped != skipped[i].get<std::string>())
        what += "\n    decode(skip_special):  HF " + shown(skipped[i].get<std::string>()) + "\n" +
                "                           us " + shown(got_skipped);
      if (!spans_tile(spans, got.size(), texts[i].size())) what += "\n    spans do not tile the text";
      if (what.empty()) continue;
      if (++bad <= kShown)
        std::cout << "MISMATCH " << style << " string " << i << " " << shown(texts[i]) << what << "\n";
    }
    std::cout << style << ": " << bad << " of " << texts.size() << " strings differ\n";
    total_bad += bad;

    // Decode of random id sequences: unknown ids, special tokens, byte-fallback runs that are not UTF-8.
    const json &rids = hf.at("random_ids"), &rdecoded = hf.at("random_ids_decoded"),
               &rskipped = hf.at("random_ids_decoded_skip_special");
    if (rids.empty() || rdecoded.size() != rids.size() || rskipped.size() != rids.size()) {
      std::cout << "FAIL: " << style << ": " << rids.size() << " random id sequences, " << rdecoded.size() << " / "
                << rskipped.size() << " decodes\n";
      return 1;
    }
    bad = 0;
    for (std::size_t i = 0; i < rids.size(); ++i) {
      const Ids r = rids[i];
      const std::string got = tok->decode(r), got_skipped = tok->decode(r, true);
      if (got == rdecoded[i].get<std::string>() && got_skipped == rskipped[i].get<std::string>()) continue;
      if (++bad <= kShown)
        std::cout << "MISMATCH " << style << " decode of ids " << shown(r) << "\n    HF "
                  << shown(rdecoded[i].get<std::string>()) << " / " << shown(rskipped[i].get<std::string>())
                  << "\n    us " << shown(got) << " / " << shown(got_skipped) << "\n";
    }
    std::cout << style << ": " << bad << " of " << rids.size() << " random id sequences decode differently\n";
    total_bad += bad;
  }
  return total_bad == 0 ? 0 : 1;
}

using shardft::testing_util::probe_text;
using shardft::testing_util::split_lengths;

int all_code_points(const std::string& dir) {
  const json doc = load_json(kBpeDir + "pretokens.json");
  const std::string context = doc.at("context");
  constexpr std::size_t kCodePoints = 0x110000 - 0x800;  // all but the surrogates
  std::size_t total_bad = 0;
  for (const auto& [name, pattern] : doc.at("regexes").items()) {
    const bpe::Regex re(pattern.get<std::string>(), false);
    const std::string path = dir + "/" + name + ".txt";
    std::ifstream in(path);
    if (!in) {
      std::cout << "FAIL: cannot open " << path << "\n";
      return 1;
    }
    std::string line;
    std::size_t lines = 0, bad = 0;
    std::uint32_t expected_cp = 0;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::uint32_t cp = 0;
      if (!(ls >> cp) || cp != expected_cp) {
        std::cout << "FAIL: " << path << " line " << lines + 1 << ": expected code point " << expected_cp << ", got '"
                  << line << "'\n";
        return 1;
      }
      expected_cp = cp + 1 == 0xD800 ? 0xE000 : cp + 1;
      std::vector<std::size_t> want;
      for (std::size_t x; ls >> x;) want.push_back(x);
      ++lines;
      const std::vector<std::size_t> got = split_lengths(re, probe_text(context, cp));
      if (got == want) continue;
      if (++bad <= kShown)
        std::cout << "MISMATCH " << name << " U+" << std::hex << std::uppercase << cp << std::dec
                  << " piece lengths: HF " << json(want).dump() << ", us " << json(got).dump() << "\n";
    }
    if (lines != kCodePoints) {
      std::cout << "FAIL: " << path << ": " << lines << " code points, expected " << kCodePoints << "\n";
      return 1;
    }
    std::cout << name << ": " << bad << " of " << lines << " code points differ\n";
    total_bad += bad;
  }
  return total_bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "random-cases" && mode != "all-code-points") {
    std::cerr << "usage: shardft_bpe_differential random-cases FILE | all-code-points DIR\n";
    return 2;
  }
  try {
    return mode == "random-cases" ? random_cases(argv[2]) : all_code_points(argv[2]);
  } catch (const std::exception& e) {
    std::cout << "FAIL: " << e.what() << "\n";
    return 1;
  }
}
