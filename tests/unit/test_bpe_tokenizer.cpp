// data/bpe_tokenizer: parity with Hugging Face `tokenizers` on the committed fixtures of
// tests/reference/make_bpe_tokenizer.py (ids token for token, decode with and without special tokens),
// round trips, byte spans, loading by directory and file, and the errors a bad tokenizer.json gets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "tokenizer/bpe_internal.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tests/common/bpe_files.hpp"
#include "data/sft_data.hpp"
#include "tests/common/bpe_probes.hpp"

namespace shardft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Ids = std::vector<std::int32_t>;

const std::string& kBpeDir = testing_util::bpe_reference_dir();
const char* const kStyles[] = {"gpt2_style",          "llama3_style",           "qwen2_style",    "edge_style",
                               "llama2_legacy_style", "llama2_metaspace_style", "spm_edge_style", "spm_never_style"};

using testing_util::bpe_load_error;
using testing_util::load_json;
using testing_util::read_text;
using testing_util::write_json;

const json& cases_of(const std::string& style) {
  static std::map<std::string, json> cache;
  auto it = cache.find(style);
  if (it == cache.end()) it = cache.emplace(style, load_json(kBpeDir + style + "/cases.json")).first;
  return it->second;
}

const Tokenizer& tokenizer_of(const std::string& style) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[style];
  if (!t) t = load_bpe_tokenizer(kBpeDir + style);
  return *t;
}

std::string shown(const std::string& text) {
  std::string s = json(text).dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::string scratch_dir() {
  const std::string d = ::testing::TempDir() + "shardft_bpe_" + std::to_string(::getpid()) + "/";
  fs::create_directories(d);
  return d;
}

// ---- parity with HF, per fixture ---------------------------------------------------------------

class BpeParity : public ::testing::TestWithParam<const char*> {};

TEST_P(BpeParity, EncodesEveryCaseTokenForToken) {
  const json& doc = cases_of(GetParam());
  const Tokenizer& tok = tokenizer_of(GetParam());
  ASSERT_GE(doc["cases"].size(), 100u);
  int checked = 0;
  for (const json& c : doc["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(tok.encode(text), c["ids"].get<Ids>()) << GetParam() << " " << shown(text);
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(doc["cases"].size()));
}

TEST_P(BpeParity, DecodesLikeHf) {
  const json& doc = cases_of(GetParam());
  const Tokenizer& tok = tokenizer_of(GetParam());
  for (const json& c : doc["cases"]) {
    const std::string text = c["text"];
    const Ids ids = c["ids"];
    EXPECT_EQ(tok.decode(ids), c.value("decoded", text)) << GetParam() << " " << shown(text);
    EXPECT_EQ(tok.decode(ids, true), c.value("decoded_skip_special", text)) << GetParam() << " " << shown(text);
  }
}

TEST_P(BpeParity, SpansTileTheText) {
  const Tokenizer& tok = tokenizer_of(GetParam());
  for (const json& c : cases_of(GetParam())["cases"]) {
    const std::string text = c["text"];
    std::vector<TokenSpan> spans;
    const Ids ids = tok.encode(text, &spans);
    ASSERT_EQ(spans.size(), ids.size()) << shown(text);
    std::size_t at = 0;
    for (const TokenSpan& s : spans) {
      EXPECT_EQ(s.begin, at) << shown(text);
      EXPECT_LE(s.begin, s.end) << shown(text);
      at = s.end;
    }
    EXPECT_EQ(at, text.size()) << shown(text);
  }
}

TEST_P(BpeParity, VocabSizeAndAddedTokens) {
  const json& doc = cases_of(GetParam());
  const Tokenizer& tok = tokenizer_of(GetParam());
  EXPECT_EQ(tok.vocab_size(), doc["vocab_size"].get<int>());
  for (const auto& [content, id] : doc["added_tokens"].items()) EXPECT_EQ(tok.special_token_id(content), id) << content;
  EXPECT_EQ(tok.special_token_id("<|no such token|>"), -1);
  EXPECT_EQ(tok.special_token_id("the"), -1);  // vocab tokens are not added tokens
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BpeParity, ::testing::ValuesIn(kStyles));

// ---- properties that hold without HF -----------------------------------------------------------

// Random valid UTF-8 from a pool that covers every pre-tokenizer class: letters, digits, whitespace
// of all kinds, punctuation, combining marks, CJK, emoji with ZWJ and skin tones, the special tokens.
std::string random_text(std::mt19937& rng, std::size_t pieces) {
  // clang-format off
  static const std::vector<std::string> pool = {
      "a", "b", "Z", "the", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u0085", "\u180e", "\u2028",
      "0", "7", "123", "'s", "'LL", "!", "?", "...", "-", "_", "(", "\"", "é", "e\u0301", "\u0301", "ß", "ü",
      "日", "本", "語", "한", "م", "ر", "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇩🇪", "\u200b", "\ufeff", "\x01", "ǅ", "Å",
      "ﬁ", "<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|im", "|>", "<"};
  // clang-format on
  std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
  std::string s;
  for (std::size_t i = 0; i < pieces; ++i) s += pool[pick(rng)];
  return s;
}

TEST(BpeTokenizer, DecodeOfEncodeIsTheText) {
  std::mt19937 rng(20240601);
  for (const char* style : {"gpt2_style", "llama3_style", "qwen2_style"}) {
    const Tokenizer& tok = tokenizer_of(style);
    for (const json& c : cases_of(style)["cases"]) {
      const std::string text = c["text"];
      std::string normalized;
      std::vector<std::uint32_t> map;
      if (std::string(style) == "qwen2_style" && bpe::nfc(text, normalized, map)) {
        EXPECT_EQ(tok.decode(tok.encode(text)), normalized) << style << " " << shown(text);  // NFC is lossy
      } else {
        EXPECT_EQ(tok.decode(tok.encode(text)), text) << style << " " << shown(text);
      }
    }
    for (int i = 0; i < 300; ++i) {
      const std::string text = random_text(rng, 1 + i % 40);
      std::string normalized;
      std::vector<std::uint32_t> map;
      const std::string want =
          std::string(style) == "qwen2_style" && bpe::nfc(text, normalized, map) ? normalized : text;
      std::vector<TokenSpan> spans;
      const Ids ids = tok.encode(text, &spans);
      ASSERT_EQ(tok.decode(ids), want) << style << " " << shown(text);
      ASSERT_EQ(spans.size(), ids.size());
      ASSERT_EQ(ids.empty() ? 0 : spans.back().end, text.size()) << style << " " << shown(text);
    }
  }
}

// Without normalization every non-added token covers exactly the bytes it stands for.
TEST(BpeTokenizer, SpansHoldEachTokensBytes) {
  for (const char* style : {"gpt2_style", "llama3_style"}) {
    const Tokenizer& tok = tokenizer_of(style);
    const std::string text = read_text(kBpeDir + "corpus.txt") + "hi<|endoftext|> <|eot_id|>\n";
    std::vector<TokenSpan> spans;
    const Ids ids = tok.encode(text, &spans);
    ASSERT_EQ(spans.size(), ids.size());
    int whole_chars = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string piece = text.substr(spans[i].begin, spans[i].end - spans[i].begin);
      const std::string decoded = tok.decode({ids[i]});
      if (decoded.find("\xEF\xBF\xBD") != std::string::npos) continue;  // part of a character
      EXPECT_EQ(piece, decoded) << style << " token " << i;
      ++whole_chars;
    }
    EXPECT_GT(whole_chars, static_cast<int>(ids.size()) / 2);
  }
}

TEST(BpeTokenizer, SpansOnNormalizedTextPointIntoTheOriginal) {
  const Tokenizer& tok = tokenizer_of("qwen2_style");
  const std::string text = "un cafe\u0301 noir<|im_end|>A\u030a!";  // NFC rewrites e+U+0301 and A+U+030A
  std::vector<TokenSpan> spans;
  const Ids ids = tok.encode(text, &spans);
  ASSERT_EQ(spans.size(), ids.size());
  const std::int32_t im_end = tok.special_token_id("<|im_end|>");
  bool found = false;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != im_end) continue;
    found = true;
    EXPECT_EQ(text.substr(spans[i].begin, spans[i].end - spans[i].begin), "<|im_end|>");
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(spans.back().end, text.size());
  EXPECT_EQ(tok.decode(ids), "un café noir<|im_end|>Å!");
}

TEST(BpeTokenizer, IgnoreMergesIsWhatChangesTheseCases) {
  json j = load_json(kBpeDir + "llama3_style/tokenizer.json");
  ASSERT_TRUE(j["model"]["ignore_merges"].get<bool>());
  j["model"]["ignore_merges"] = false;
  const auto plain = load_bpe_tokenizer(write_json("llama3_no_ignore_merges.json", j));
  const Tokenizer& tok = tokenizer_of("llama3_style");
  int differing = 0;
  for (const json& c : cases_of("llama3_style")["cases"]) {
    const std::string text = c["text"];
    const Ids want =
        c.contains("ids_without_ignore_merges") ? c["ids_without_ignore_merges"].get<Ids>() : c["ids"].get<Ids>();
    EXPECT_EQ(plain->encode(text), want) << shown(text);
    if (c.contains("ids_without_ignore_merges")) {
      ++differing;
      EXPECT_NE(tok.encode(text), want) << shown(text);
    }
  }
  EXPECT_GE(differing, 5);
}

TEST(BpeTokenizer, ConcurrentEncodesAgree) {
  const Tokenizer& tok = tokenizer_of("qwen2_style");
  const json& cases = cases_of("qwen2_style")["cases"];
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        for (const json& c : cases) {
          if (tok.encode(c["text"].get<std::string>()) != c["ids"].get<Ids>()) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(BpeTokenizer, LongRunsOfOneClass) {
  const Tokenizer& tok = tokenizer_of("llama3_style");
  for (const std::string& text : {std::string(1 << 20, ' '), std::string(200000, 'a'), std::string(100000, '\n'),
                                  std::string(300000, '7'), " x" + std::string(50000, '\t') + "y"}) {
    std::vector<TokenSpan> spans;
    const Ids ids = tok.encode(text, &spans);
    EXPECT_EQ(tok.decode(ids), text);
    ASSERT_FALSE(spans.empty());
    EXPECT_EQ(spans.back().end, text.size());
  }
}

TEST(BpeTokenizer, InvalidUtf8IsAnError) {
  const Tokenizer& tok = tokenizer_of("gpt2_style");
  for (const std::string bad : {"\xff", "ab\xC3", "\xED\xA0\x80", "\xC0\xAF", "ok\xF4\x90\x80\x80"}) {
    try {
      tok.encode(bad);
      ADD_FAILURE() << "no error for " << shown(bad);
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    }
  }
}

TEST(BpeTokenizer, DecodeSkipsUnknownIdsAndRepairsBrokenUtf8) {
  const Tokenizer& tok = tokenizer_of("gpt2_style");
  EXPECT_EQ(tok.decode({-1, 1 << 30, tok.vocab_size()}), "");
  // The one-byte tokens of bytes 0x80..0xFF (and merged pieces of a character) are no text alone: each
  // decodes to one U+FFFD.
  int lone = 0;
  for (std::int32_t id = 0; id < tok.vocab_size(); ++id) lone += tok.decode({id}) == "\xEF\xBF\xBD";
  EXPECT_GE(lone, 128);
  // Rust's from_utf8_lossy: one U+FFFD per maximal ill-formed subpart.
  const std::string r = "\xEF\xBF\xBD";
  // clang-format off
  const std::pair<std::string, std::string> lossy[] = {
      {"\xF0\x9F\x98", r}, {"\xC3(", r + "("}, {"\xED\xA0\x80", r + r + r}, {"\xF4\x90\x80\x80", r + r + r + r},
      {"\xE2\x82" "a", r + "a"}, {"a\x80\x80z", "a" + r + r + "z"}, {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"}};
  // clang-format on
  for (const auto& [in, want] : lossy) {
    std::string out;
    bpe::append_utf8_lossy(in, out);
    EXPECT_EQ(out, want) << shown(in);
  }
}

// ---- loading ------------------------------------------------------------------------------------

TEST(BpeTokenizer, LoadsFromDirectoryOrFile) {
  const auto by_dir = load_bpe_tokenizer(kBpeDir + "qwen2_style");
  const auto by_file = load_bpe_tokenizer(kBpeDir + "qwen2_style/tokenizer.json");
  const auto via_factory = load_tokenizer(kBpeDir + "qwen2_style");
  const std::string fp = by_file->fingerprint();
  EXPECT_EQ(fp.rfind("bpe:" + kBpeDir + "qwen2_style/tokenizer.json:", 0), 0u) << fp;
  EXPECT_EQ(fp.size(), ("bpe:" + kBpeDir + "qwen2_style/tokenizer.json:").size() + 16) << fp;
  EXPECT_EQ(by_dir->fingerprint(), fp);
  EXPECT_EQ(via_factory->fingerprint(), fp);
  EXPECT_NE(load_bpe_tokenizer(kBpeDir + "llama3_style")->fingerprint().substr(fp.size() - 16),
            fp.substr(fp.size() - 16));
  const std::string text = "Grüße <|im_start|>user\nhi<|im_end|>";
  EXPECT_EQ(by_dir->encode(text), by_file->encode(text));
  EXPECT_EQ(load_tokenizer("byte")->fingerprint(), "byte");
  EXPECT_EQ(load_tokenizer("")->fingerprint(), "byte");
}

TEST(BpeTokenizer, BadFilesAreNamedWithTheKey) {
  const json base = load_json(kBpeDir + "qwen2_style/tokenizer.json");
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"wordpiece", [](json& j) { j["model"]["type"] = "WordPiece"; },
       "model.type \"WordPiece\" is not supported (expected \"BPE\")"},
      {"unigram", [](json& j) { j["model"]["type"] = "Unigram"; }, "model.type \"Unigram\" is not supported"},
      {"no_merges", [](json& j) { j["model"].erase("merges"); }, "model.merges is missing (expected a list of merges)"},
      {"no_vocab", [](json& j) { j["model"].erase("vocab"); }, "model.vocab is missing"},
      {"no_model", [](json& j) { j.erase("model"); }, ": model is missing"},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "model.dropout 0.1 is not supported (expected null"},
      {"byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; },
       "model.byte_fallback true is not supported"},
      {"prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
       "model.continuing_subword_prefix \"##\" is not supported"},
      {"bad_merge",
       [](json& j) {
         j["model"]["merges"][3] = json::array({"not-a-token", "x"});
       },
       "model.merges[3] \"not-a-token\" is not in model.vocab"},
      {"bad_merge_str", [](json& j) { j["model"]["merges"][0] = "nospace"; },
       "model.merges[0] \"nospace\" is not a merge"},
      {"unk", [](json& j) { j["model"]["unk_token"] = "<unk>"; }, "model.unk_token \"<unk>\" is not in model.vocab"},
      {"lowercase",
       [](json& j) {
         j["normalizer"] = {{"type", "Lowercase"}};
       },
       "normalizer.type \"Lowercase\" is not supported (expected null, \"NFC\""},
      {"nfkc_in_seq",
       [](json& j) {
         j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "NFKC"}}}}};
       },
       "normalizer.normalizers[1].type \"NFKC\" is not supported"},
      {"metaspace",
       [](json& j) {
         j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Metaspace"}, {"replacement", "_"}};
       },
       "pre_tokenizer.pretokenizers[0].type \"Metaspace\" is not supported (expected \"Split\" or \"ByteLevel\")"},
      {"whitespace",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "pre_tokenizer.type \"Whitespace\" is not supported (expected \"ByteLevel\", or a \"Sequence\""},
      {"no_pre", [](json& j) { j["pre_tokenizer"] = nullptr; }, "pre_tokenizer is null (expected \"ByteLevel\""},
      {"removed", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; },
       "pre_tokenizer.pretokenizers[0].behavior \"Removed\" is not supported (expected \"Isolated\")"},
      {"invert", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; },
       "pre_tokenizer.pretokenizers[0].invert true is not supported"},
      {"bad_regex", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
       "pre_tokenizer.pretokenizers[0].pattern.Regex does not compile"},
      {"bytelevel_first",
       [](json& j) { std::swap(j["pre_tokenizer"]["pretokenizers"][0], j["pre_tokenizer"]["pretokenizers"][1]); },
       "pre_tokenizer.pretokenizers[0] is ByteLevel but not the last step"},
      {"decoder",
       [](json& j) {
         j["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}};
       },
       "decoder.type \"WordPiece\" is not supported (expected \"ByteLevel\")"},
      {"no_decoder", [](json& j) { j["decoder"] = nullptr; }, "decoder is null"},
      {"post",
       [](json& j) {
         j["post_processor"] = {{"type", "Mystery"}};
       },
       "post_processor.type \"Mystery\" is not supported"},
      {"added", [](json& j) { j["added_tokens"][1]["content"] = ""; },
       "added_tokens[1].content is \"\" (expected a non-empty string)"},
      {"vocab_id", [](json& j) { j["model"]["vocab"]["!"] = "zero"; },
       "model.vocab[\"!\"] is \"zero\" (expected an id >= 0)"},
  };
  for (const Case& c : cases) {
    json j = base;
    c.edit(j);
    const std::string path = write_json(std::string(c.name) + ".json", j);
    const std::string msg = bpe_load_error(path);
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << c.name << ": " << msg;  // the file comes first
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.name << ": " << msg;
  }
  // Sanity: the unedited file loads, and the accepted post-processors load too.
  EXPECT_EQ(bpe_load_error(write_json("unedited.json", base)), "(no error)");
  json j = base;
  j["post_processor"] = {{"type", "Sequence"},
                         {"processors", {{{"type", "ByteLevel"}}, {{"type", "TemplateProcessing"}}}}};
  j["model"]["merges"][0] =
      j["model"]["merges"][0][0].get<std::string>() + " " + j["model"]["merges"][0][1].get<std::string>();
  j["normalizer"] = nullptr;
  EXPECT_EQ(bpe_load_error(write_json("accepted.json", j)), "(no error)");
}

TEST(BpeTokenizer, FilesThatAreNotTokenizers) {
  const std::string dir = scratch_dir();
  std::ofstream(dir + "garbage.json") << "{\"model\": [1, 2,";
  std::string msg = bpe_load_error(dir + "garbage.json");
  EXPECT_EQ(msg.rfind(dir + "garbage.json: not valid JSON", 0), 0u) << msg;
  msg = bpe_load_error(dir + "missing.json");
  EXPECT_NE(msg.find(dir + "missing.json: no such file"), std::string::npos) << msg;
  fs::create_directories(dir + "empty_model_dir");
  msg = bpe_load_error(dir + "empty_model_dir");
  EXPECT_NE(msg.find("empty_model_dir: no tokenizer.json in this directory"), std::string::npos) << msg;
  std::ofstream(dir + "list.json") << "[1, 2]";
  msg = bpe_load_error(dir + "list.json");
  EXPECT_NE(msg.find("list.json: (top level) is a list"), std::string::npos) << msg;
}

// ---- building blocks ------------------------------------------------------------------------------

TEST(BpeInternals, ByteAlphabetIsGpt2s) {
  EXPECT_EQ(bpe::byte_to_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(bpe::byte_to_char('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(bpe::byte_to_char('a'), U'a');
  EXPECT_EQ(bpe::byte_to_char(0xAD), U'\u0143');  // the soft hyphen is not printable: the last extra char
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = bpe::byte_to_char(static_cast<unsigned char>(b));
    EXPECT_EQ(bpe::char_to_byte(c), b);
    seen.insert(c);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(bpe::char_to_byte(U'\u3000'), -1);
  EXPECT_EQ(bpe::byte_level_decode("\u0120hello\u010A"), " hello\n");
  EXPECT_EQ(bpe::byte_level_decode(" h\u00e9"), " h\u00e9");  // a space is no byte character: kept as is
}

TEST(BpeInternals, WhiteSpaceMatchesOniguruma) {
  // \s must be Unicode White_Space: NEL and the ideographic space are in, U+180E / ZWSP / BOM are out.
  const bpe::Regex ws("\\s+", false), not_ws("[^\\s]+", false);
  const std::pair<std::string, bool> chars[] = {{"\u0085", true},  {"\u00a0", true},  {"\u3000", true},
                                                {"\u2028", true},  {"\v", true},      {"\u180e", false},
                                                {"\u200b", false}, {"\ufeff", false}, {"\x1c", false}};
  for (const auto& [ch, is_space] : chars) {
    std::vector<bpe::Range> spaces, others;
    ws.split_isolated("a" + ch + "a", 0, spaces);
    not_ws.split_isolated("a" + ch + "a", 0, others);
    EXPECT_EQ(spaces.size(), is_space ? 3u : 1u) << shown(ch);
    EXPECT_EQ(others.size(), is_space ? 3u : 1u) << shown(ch);
  }
  EXPECT_EQ(bpe::onig_compatible_pattern(R"(\s+(?!\S)|[^\s\p{L}]|\\s|\Q\s\E)"),
            R"([\t-\r\x{20}\x{85}\p{Z}]+(?![^\t-\r\x{20}\x{85}\p{Z}])|[^\t-\r\x{20}\x{85}\p{Z}\p{L}]|\\s|\Q\s\E)");
}

using testing_util::probe_text;
using testing_util::split_lengths;

// HF's Split(Isolated) pieces around ~200 probe code points (every White_Space character, format
// characters, marks, digits, letters, emoji, private use, unassigned), for the three regexes.
TEST(BpeInternals, PreTokensMatchHfAroundProbeCodePoints) {
  const json doc = load_json(kBpeDir + "pretokens.json");
  const std::string context = doc["context"];
  const auto cps = doc["code_points"].get<std::vector<std::uint32_t>>();
  ASSERT_GE(cps.size(), 150u);
  for (const auto& [name, pattern] : doc["regexes"].items()) {
    const bpe::Regex re(pattern.get<std::string>(), false);
    const json& lengths = doc["lengths"][name];
    ASSERT_EQ(lengths.size(), cps.size());
    for (std::size_t i = 0; i < cps.size(); ++i) {
      EXPECT_EQ(split_lengths(re, probe_text(context, cps[i])), lengths[i].get<std::vector<std::size_t>>())
          << name << " U+" << std::hex << cps[i];
    }
  }
}

TEST(BpeInternals, NfcMapsOffsetsBackToTheOriginal) {
  std::string out;
  std::vector<std::uint32_t> map;
  EXPECT_FALSE(bpe::nfc("caf\u00e9 ascii", out, map));
  ASSERT_TRUE(bpe::nfc("cafe\u0301!", out, map));  // "cafe" + U+0301 (2 bytes) + "!" = 7 bytes
  EXPECT_EQ(out, "caf\u00e9!");                    // "caf" + é (2 bytes) + "!" = 6 bytes
  EXPECT_EQ(map, (std::vector<std::uint32_t>{0, 1, 2, 3, 6, 6, 7}));
  // HF's alignment: é (both bytes) is the "e" it was composed from; U+0301's bytes 4-5 belong to nothing.
  bpe::Alignment hf;
  ASSERT_TRUE(bpe::nfc("cafe\u0301!", out, map, &hf));
  EXPECT_EQ(hf.begin, (std::vector<std::uint32_t>{0, 1, 2, 3, 3, 6, 7}));
  EXPECT_EQ(hf.end, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 4, 7}));
  // three code points composed into one, then an unchanged two-byte character
  ASSERT_TRUE(bpe::nfc("u\u0308\u0304\u00e9", out, map, &hf));
  EXPECT_EQ(out, "\u01d6\u00e9");
  EXPECT_EQ(hf.begin, (std::vector<std::uint32_t>{0, 0, 5, 6, 7}));
  EXPECT_EQ(hf.end, (std::vector<std::uint32_t>{0, 1, 1, 6, 7}));
}

// A token's HF offsets (TokenSpan::hf_begin / hf_end) are what tokenizers reports, in bytes: transformers'
// assistant masks are computed from them. Byte-level tokens inside a character cover all of it; a
// character NFC composed covers the code point it starts with; the spans themselves still tile the text.
// Expected: tokenizers 0.20.3's offsets for this text with qwen2_style, converted from characters to bytes.
TEST(BpeTokenizer, HfOffsetsFollowTokenizersAlignment) {
  const Tokenizer& tok = tokenizer_of("qwen2_style");
  const std::string text = "Noted: e\u0301 then u\u0308\u0304 \u732b";
  std::vector<TokenSpan> spans;
  const Ids ids = tok.encode(text, &spans);
  ASSERT_EQ(spans.size(), ids.size());
  std::vector<std::pair<std::size_t, std::size_t>> hf;
  std::size_t at = 0;
  for (const TokenSpan& s : spans) {
    hf.push_back({s.hf_begin, s.hf_end});
    EXPECT_EQ(s.begin, at);
    at = s.end;
  }
  EXPECT_EQ(at, text.size());
  // N o ted : Ġ é(from e + U+0301) Ġt h en Ġ ǖ(2 byte tokens, from u + U+0308 + U+0304) Ġ 猫(3 byte tokens)
  const std::vector<std::pair<std::size_t, std::size_t>> expected = {
      {0, 1},   {1, 2},   {2, 5},   {5, 6},   {6, 7},   {7, 8},   {10, 12}, {12, 13},
      {13, 15}, {15, 16}, {16, 17}, {16, 17}, {21, 22}, {22, 25}, {22, 25}, {22, 25}};
  EXPECT_EQ(hf, expected);
}

TEST(BpeInternals, MergesFollowRankThenPosition) {
  // Vocab a b c ab bc abc; merges (b c) before (a b): "abc" -> a + bc, and no (a, bc) merge exists.
  bpe::BpeModel m;
  m.byte_id.fill(-1);
  m.byte_id['a'] = 0, m.byte_id['b'] = 1, m.byte_id['c'] = 2;
  m.merges.insert(1, 2, 0, 4);  // b c -> bc
  m.merges.insert(0, 1, 1, 3);  // a b -> ab
  bpe::MergeScratch s;
  std::vector<std::int32_t> ids;
  std::vector<std::uint32_t> lens;
  m.tokenize("abc", s, ids, lens);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{0, 4}));
  EXPECT_EQ(lens, (std::vector<std::uint32_t>{1, 2}));
  ids.clear(), lens.clear();
  m.tokenize("abab", s, ids, lens);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{3, 3}));
  ids.clear(), lens.clear();
  m.merges.insert(0, 0, 2, 6);  // a a -> aa; in "aaa" the leftmost pair merges first
  m.tokenize("aaa", s, ids, lens);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{6, 0}));
  ids.clear(), lens.clear();
  m.word_ids["abc"] = 5;
  m.ignore_merges = true;
  m.tokenize("abc", s, ids, lens);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{5}));
  ids.clear(), lens.clear();
  m.unk_id = 9;  // unknown bytes: unk, fused when asked
  m.fuse_unk = true;
  m.tokenize("xyab", s, ids, lens);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{9, 3}));
  EXPECT_EQ(lens, (std::vector<std::uint32_t>{2, 2}));
}

}  // namespace
}  // namespace shardft
