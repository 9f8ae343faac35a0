// data/bpe_tokenizer, SentencePiece style (Llama 2, Mistral, TinyLlama, Phi-3): what the HF parity
// fixtures (test_bpe_tokenizer.cpp's BpeParity, tests/reference/make_spm_tokenizer.py) do not pin down on
// their own: the errors an unsupported file gets, the older Metaspace keys, the unk / byte-fallback order
// HF uses, where long words may be cut, ByteFallback decoding of broken UTF-8, and spans through the "▁"
// rewriting.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/bpe_internal.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tests/common/bpe_files.hpp"
#include "data/sft_data.hpp"

namespace shardft {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Ids = std::vector<std::int32_t>;

const std::string& kBpeDir = testing_util::bpe_reference_dir();
const std::string kMeta = "\xe2\x96\x81";  // "▁"

using testing_util::bpe_load_error;
using testing_util::load_json;
using testing_util::write_json;

TEST(BpeSentencePiece, UnsupportedFilesAreNamedWithTheKey) {
  const json base = load_json(kBpeDir + "llama2_legacy_style/tokenizer.json");
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::string want;
  };
  const json metaspace = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}, {"split", false}};
  const std::vector<Case> cases = {
      {"regex_replace",
       [](json& j) {
         j["normalizer"]["normalizers"][1]["pattern"] = {{"Regex", " +"}};
       },
       "normalizer.normalizers[1].pattern {\"Regex\":\" +\"} is not supported (expected {\"String\": ...}"},
      {"lowercase",
       [](json& j) {
         j["normalizer"]["normalizers"][0] = {{"type", "Lowercase"}};
       },
       "normalizer.normalizers[0].type \"Lowercase\" is not supported (expected null, \"NFC\", \"Prepend\", "
       "\"Replace\""},
      {"whitespace",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "pre_tokenizer.type \"Whitespace\" is not supported (expected null, \"Metaspace\""},
      {"metaspace_first",
       [&](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers",
              {metaspace, {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Isolated"}}}}};
       },
       "pre_tokenizer.pretokenizers[0] is Metaspace but not the last step"},
      {"replacement", [&](json& j) { (j["pre_tokenizer"] = metaspace)["replacement"] = "ab"; },
       "pre_tokenizer.replacement \"ab\" is not one character"},
      {"scheme", [&](json& j) { (j["pre_tokenizer"] = metaspace)["prepend_scheme"] = "sometimes"; },
       "pre_tokenizer.prepend_scheme \"sometimes\" is not supported (expected \"always\", \"first\" or \"never\")"},
      {"old_keys_disagree",
       [&](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMeta}, {"add_prefix_space", false}};
       },
       "pre_tokenizer.add_prefix_space false does not match prepend_scheme"},
      {"decoder",
       [](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder.type \"WordPiece\" is not supported (expected null, \"Replace\" (a String pattern), \"ByteFallback\""},
      {"strip_content", [](json& j) { j["decoder"]["decoders"][3]["content"] = "ab"; },
       "decoder.decoders[3].content \"ab\" is not one character"},
      {"strip_start", [](json& j) { j["decoder"]["decoders"][3]["start"] = -1; },
       "decoder.decoders[3].start is -1 (expected a count >= 0)"},
      {"decoder_regex",
       [](json& j) {
         j["decoder"]["decoders"][0]["pattern"] = {{"Regex", "x"}};
       },
       "decoder.decoders[0].pattern {\"Regex\":\"x\"} is not supported"},
      {"fallback_byte_level",
       [](json& j) {
         j["normalizer"] = nullptr;
         j["pre_tokenizer"] = {{"type", "ByteLevel"}};
         j["decoder"] = {{"type", "ByteLevel"}};
       },
       "model.byte_fallback true is not supported with the ByteLevel pre-tokenizer or decoder"},
      {"prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
       "model.continuing_subword_prefix \"##\" is not supported"},
      {"added_id", [](json& j) { j["added_tokens"][3]["id"] = 990; },
       "added_tokens[3].id is 990 but HF gives \"<|user|>\" id 956"},
  };
  for (const Case& c : cases) {
    json j = base;
    c.edit(j);
    const std::string path = write_json(std::string(c.name) + ".json", j);
    const std::string msg = bpe_load_error(path);
    EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.name << ": " << msg;
  }
  EXPECT_EQ(bpe_load_error(write_json("unedited.json", base)), "(no error)");
}

// Files written by tokenizers before 0.14 have add_prefix_space (and str_rep) instead of prepend_scheme;
// HF reads add_prefix_space true as prepend_scheme "always", and split defaults to true.
TEST(BpeSentencePiece, OlderMetaspaceKeysReadAsHfReadsThem) {
  json j = load_json(kBpeDir + "spm_edge_style/tokenizer.json");
  ASSERT_EQ(j["pre_tokenizer"]["prepend_scheme"], "always");
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kMeta}, {"add_prefix_space", true}, {"str_rep", kMeta}};
  const auto older = load_bpe_tokenizer(write_json("older.json", j));
  const auto fixture = load_bpe_tokenizer(kBpeDir + "spm_edge_style");
  // Held in a local: a range-for over a temporary's ["cases"] would read it after it is destroyed.
  const json cases = load_json(kBpeDir + "spm_edge_style/cases.json");
  for (const json& c : cases["cases"]) {
    EXPECT_EQ(older->encode(c["text"]), c["ids"].get<Ids>()) << c["text"];
  }
  j["pre_tokenizer"]["add_prefix_space"] = false;
  j["pre_tokenizer"]["prepend_scheme"] = "never";
  EXPECT_EQ(bpe_load_error(write_json("older_never.json", j)), "(no error)");
}

// A tiny SentencePiece-style file: <unk>, "a", "▁", and the byte tokens of "é" only.
json tiny(bool fuse_unk) {
  return {{"model",
           {{"type", "BPE"},
            {"vocab", {{"<unk>", 0}, {"a", 1}, {kMeta, 2}, {"<0xC3>", 3}, {"<0xA9>", 4}}},
            {"merges", json::array()},
            {"unk_token", "<unk>"},
            {"byte_fallback", true},
            {"fuse_unk", fuse_unk}}},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}}}}}}};
}

// HF keeps an unknown character waiting (so that fuse_unk can extend it) until the next character that is
// in the vocab: one that falls back to bytes meanwhile comes out before it. Spans still tile the text.
TEST(BpeSentencePiece, UnkWaitsForTheNextKnownCharacter) {
  const auto fused = load_bpe_tokenizer(write_json("tiny_fused.json", tiny(true)));
  const auto unfused = load_bpe_tokenizer(write_json("tiny_unfused.json", tiny(false)));
  const std::string text =
      "\xe4\xb8\xad\xe6\x96\x87\xc3\xa9"  // 中文é
      "a";
  std::vector<TokenSpan> spans;
  EXPECT_EQ(fused->encode(text, &spans), (Ids{3, 4, 0, 1}));
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans.back().end, text.size());
  EXPECT_EQ(unfused->encode(text), (Ids{0, 3, 4, 0, 1}));  // the first unk goes when the second comes
  EXPECT_EQ(fused->encode("a\xe4\xb8\xad"), (Ids{1, 0}));  // a waiting unk is flushed at the end
}

// Words are cut before each "▁" only when no vocab token has a "▁" after another character: here "o▁"
// exists, so "▁o▁o" stays one word and merges across the second "▁" (as HF merges it).
TEST(BpeSentencePiece, WordsAreCutOnlyWhereNoTokenSpans) {
  json j = tiny(true);
  j["model"]["vocab"] = {{"<unk>", 0}, {"o", 1}, {kMeta, 2}, {"o" + kMeta, 3}};
  j["model"]["merges"] = json::array({json::array({"o", kMeta})});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", kMeta}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}}}};
  EXPECT_EQ(load_bpe_tokenizer(write_json("cut.json", j))->encode("o o"), (Ids{2, 3, 1}));
  j["model"]["vocab"] = {{"<unk>", 0}, {"o", 1}, {kMeta, 2}, {kMeta + "o", 3}};
  j["model"]["merges"] = json::array({json::array({kMeta, "o"})});
  EXPECT_EQ(load_bpe_tokenizer(write_json("cut2.json", j))->encode("o o"), (Ids{3, 3}));
}

TEST(BpeSentencePiece, ByteFallbackDecodesBrokenUtf8OneReplacementPerByte) {
  const auto tok = load_bpe_tokenizer(write_json("tiny_decode.json", tiny(true)));
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(tok->decode({3, 4}), "\xc3\xa9");                // é
  EXPECT_EQ(tok->decode({3, 1, 4}), fffd + "a" + fffd);      // runs end at a token that is no byte
  EXPECT_EQ(tok->decode({3, 3, 4}), fffd + fffd + fffd);     // one per byte of a bad run
  EXPECT_EQ(tok->decode({2, 1, 2, 2, 1, 99, -1}), " a  a");  // unknown ids skipped, as HF does
}

// Spans through Prepend / Replace (legacy Llama 2) and Metaspace ("first", non-legacy): a "▁" that
// replaced a space covers it, a prepended one covers nothing.
TEST(BpeSentencePiece, SpansCoverTheSpacesTheMetaspaceStandsFor) {
  for (const char* style : {"llama2_legacy_style", "llama2_metaspace_style"}) {
    const auto tok = load_bpe_tokenizer(kBpeDir + style);
    const json vocab = load_json(kBpeDir + style + "/tokenizer.json")["model"]["vocab"];
    std::map<std::int32_t, std::string> token_of;
    for (const auto& [t, id] : vocab.items()) token_of[id.get<std::int32_t>()] = t;
    const std::string text = "  two  spaces and one\nline\n";
    std::vector<TokenSpan> spans;
    const Ids ids = tok->encode(text, &spans);
    ASSERT_EQ(spans.size(), ids.size());
    std::string rebuilt;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      std::string want = token_of.at(ids[i]);
      for (std::size_t at; (at = want.find(kMeta)) != std::string::npos;) want.replace(at, kMeta.size(), " ");
      const std::string piece = text.substr(spans[i].begin, spans[i].end - spans[i].begin);
      if (i == 0 && piece != want) {
        EXPECT_EQ(" " + piece, want) << style;  // the prepended "▁" covers nothing
      } else {
        EXPECT_EQ(piece, want) << style << " token " << i;
      }
      rebuilt += piece;
    }
    EXPECT_EQ(rebuilt, text) << style;
  }
}

TEST(BpeSentencePiece, NormalizersMapBackToTheInput) {
  using Kind = bpe::NormalizerStep::Kind;
  const std::vector<bpe::NormalizerStep> llama = {{Kind::prepend, "", kMeta}, {Kind::replace, " ", kMeta}};
  std::string out;
  std::vector<std::uint32_t> map;
  bpe::NormalizeScratch scratch;
  ASSERT_TRUE(bpe::normalize(llama, "a b", out, map, scratch));
  EXPECT_EQ(out, kMeta + "a" + kMeta + "b");
  // ▁ (inserted, covers nothing) | a | ▁ (the space: first byte at it, the others after it) | b | end
  EXPECT_EQ(map, (std::vector<std::uint32_t>{0, 0, 0, 0, 1, 2, 2, 2, 3}));
  EXPECT_FALSE(bpe::normalize(llama, "", out, map, scratch));  // Prepend leaves empty text alone
  EXPECT_FALSE(bpe::normalize({{Kind::replace, " ", kMeta}}, "ab", out, map, scratch));
}

}  // namespace
}  // namespace shardft
