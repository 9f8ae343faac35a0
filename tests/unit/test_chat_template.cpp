// Chat templates: parity of the chatml / llama3 renderings with transformers' apply_chat_template on the
// official Qwen2 and Llama-3 jinja templates (tests/reference/chat_templates.json), assistant-only label
// masks for every template, plain-text samples, truncation, generation prompts, stop and pad ids, and the
// errors for a tokenizer that lacks a template's token.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/chat_template.hpp"

namespace shardft {
namespace {

using Ids = std::vector<std::int32_t>;
constexpr std::int32_t kIgnore = -100;

// Bytes are ids 0..255; the given special tokens follow from 256. Like an HF tokenizer's added tokens,
// specials are split out of the text first, so "<|im_end|>" inside a message is one id.
// With pairs, text between specials is cut into two-byte tokens (id = the first byte), so tokens
// cross the boundaries between segments the way BPE merges do.
class TableTokenizer : public Tokenizer {
 public:
  explicit TableTokenizer(std::vector<std::string> specials, bool pairs = false)
      : specials_(std::move(specials)), pairs_(pairs) {}

  Ids encode(const std::string& text, std::vector<TokenSpan>* spans) const override {
    Ids ids;
    std::vector<TokenSpan> out;
    std::size_t i = 0;
    while (i < text.size()) {
      bool matched = false;
      for (std::size_t s = 0; s < specials_.size() && !matched; ++s) {
        if (text.compare(i, specials_[s].size(), specials_[s]) == 0) {
          ids.push_back(256 + static_cast<std::int32_t>(s));
          out.push_back({i, i + specials_[s].size()});
          i += specials_[s].size();
          matched = true;
        }
      }
      if (matched) continue;
      const std::size_t len = pairs_ && i + 1 < text.size() ? 2 : 1;
      ids.push_back(static_cast<unsigned char>(text[i]));
      out.push_back({i, i + len});
      i += len;
    }
    if (spans) *spans = out;
    return ids;
  }
  std::string decode(const Ids& ids, bool skip_special_tokens) const override {
    std::string text;
    for (std::int32_t id : ids) {
      if (id < 256) text.push_back(static_cast<char>(id));
      else if (!skip_special_tokens) text += specials_.at(id - 256);
    }
    return text;
  }
  int vocab_size() const override { return 256 + static_cast<int>(specials_.size()); }
  std::int32_t special_token_id(const std::string& content) const override {
    auto it = std::find(specials_.begin(), specials_.end(), content);
    return it == specials_.end() ? -1 : 256 + static_cast<std::int32_t>(it - specials_.begin());
  }
  std::string fingerprint() const override { return "table"; }

 private:
  std::vector<std::string> specials_;
  bool pairs_;
};

const std::vector<std::string> kQwenSpecials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
const std::vector<std::string> kLlamaSpecials = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                                 "<|end_header_id|>", "<|eot_id|>"};

std::string message_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

// ---- parity with transformers ------------------------------------------------------------------

TEST(ChatTemplateParity, MatchesTransformersRenderings) {
  std::ifstream in(std::string(SHARDFT_REFERENCE_DIR) + "/chat_templates.json");
  ASSERT_TRUE(in) << "missing tests/reference/chat_templates.json";
  const nlohmann::json fixture = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& c : fixture.at("cases")) {
    Conversation conv;
    for (const auto& m : c.at("messages")) conv.push_back({m.at("role"), m.at("content")});
    const bool gen = c.at("add_generation_prompt").get<bool>();
    for (const auto& [name, expected] : c.at("rendered").items()) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " / " + name);
      EXPECT_EQ(segments_text(render_chat(parse_chat_template_kind(name), conv, gen)), expected.get<std::string>());
      ++checked;
    }
  }
  EXPECT_EQ(checked, 14);
}

// With real byte-level BPE tokenizers (the templates' special tokens are added tokens there): joining
// text segments and encoding them once gives exactly transformers' apply_chat_template(tokenize=True).
TEST(ChatTemplateParity, TokenIdsMatchTransformersWithBpeTokenizers) {
  std::ifstream in(std::string(SHARDFT_REFERENCE_DIR) + "/chat_templates.json");
  ASSERT_TRUE(in);
  const nlohmann::json fixture = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& [name, path] : fixture.at("tokenizers").items()) {
    const std::unique_ptr<Tokenizer> tok = load_tokenizer(std::string(SHARDFT_REFERENCE_DIR) + "/" + path.get<std::string>());
    const ChatTemplateKind kind = parse_chat_template_kind(name);
    const ChatEncoder enc(*tok, chat_template_for(kind, *tok));
    for (const auto& c : fixture.at("cases")) {
      SCOPED_TRACE(c.at("name").get<std::string>() + " / " + name);
      Conversation conv;
      for (const auto& m : c.at("messages")) conv.push_back({m.at("role"), m.at("content")});
      const bool gen = c.at("add_generation_prompt").get<bool>();
      const TokenizedSample s = enc.encode_segments(render_chat(enc.chat_template(), conv, gen), 1 << 20);
      EXPECT_EQ(s.input_ids, c.at("ids").at(name).get<Ids>());
      if (!gen && ChatEncoder::can_generate(conv)) {
        // The generation prompt is the sample's prefix, and the labels decode to the answers + end tokens.
        const GenerationPrompt p = enc.generation_prompt(conv);
        EXPECT_TRUE(std::equal(p.prompt_ids.begin(), p.prompt_ids.end(), s.input_ids.begin()));
        Ids labelled;
        for (std::int32_t l : s.labels) {
          if (l != kIgnore) labelled.push_back(l);
        }
        std::string want;
        for (const Turn& t : conv) {
          if (t.role != "assistant") continue;
          want += (kind == ChatTemplateKind::llama3 ? python_strip(t.content) : t.content);
          want += kind == ChatTemplateKind::llama3 ? "<|eot_id|>" : "<|im_end|>";
        }
        EXPECT_EQ(tok->decode(labelled, false), want);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 14);
}

TEST(ChatTemplateParity, PythonStripIsUnicodeAware) {
  EXPECT_EQ(python_strip(" \t\n\r\v\f a b \x1c\x1f"), "a b");
  EXPECT_EQ(python_strip("\xC2\xA0\xE3\x80\x80x\xE2\x80\x83\xC2\x85"), "x");  // NBSP, ideographic, em space, NEL
  EXPECT_EQ(python_strip("\xE2\x80\x8Bx\xE2\x80\x8B"), "\xE2\x80\x8Bx\xE2\x80\x8B");  // zero-width space is not space
  EXPECT_EQ(python_strip("   "), "");
  EXPECT_EQ(python_strip(""), "");
  EXPECT_EQ(python_strip(" \xFF "), "\xFF");  // bad UTF-8 is kept as it is
}

// ---- labels ------------------------------------------------------------------------------------

// The labelled tokens of a sample, in order, decoded.
std::string labelled_text(const Tokenizer& tok, const TokenizedSample& s) {
  Ids ids;
  for (std::size_t t = 0; t < s.labels.size(); ++t) {
    if (s.labels[t] == kIgnore) continue;
    EXPECT_EQ(s.labels[t], s.input_ids[t]) << "t=" << t;
    ids.push_back(s.labels[t]);
  }
  return tok.decode(ids, false);
}

const Conversation kMultiTurn = {{"system", "sys"},  {"user", "q1"},         {"assistant", "a1"},
                                 {"user", "q2"},     {"assistant", " a2 \n"}};

TEST(ChatTemplateLabels, OnlyAssistantContentAndItsEndTokenTakeLoss) {
  struct Case {
    ChatTemplateKind kind;
    std::vector<std::string> specials;
    std::string labelled;
  };
  const std::vector<Case> cases = {
      {ChatTemplateKind::shardft, {"<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"},
       "a1<|end|> a2 \n<|end|>"},
      {ChatTemplateKind::chatml, kQwenSpecials, "a1<|im_end|> a2 \n<|im_end|>"},
      {ChatTemplateKind::llama3, kLlamaSpecials, "a1<|eot_id|>a2<|eot_id|>"},  // llama3 trims
      {ChatTemplateKind::plain, kQwenSpecials, "a1 a2 \n<|endoftext|>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(chat_template_name(c.kind));
    const TableTokenizer tok(c.specials);
    const ChatEncoder enc(tok, chat_template_for(c.kind, tok));
    const TokenizedSample s = enc.encode(kMultiTurn, 4096);
    ASSERT_EQ(s.labels.size(), s.input_ids.size());
    EXPECT_EQ(labelled_text(tok, s), c.labelled);
    // The ids are the rendered text's, special by special.
    EXPECT_EQ(tok.decode(s.input_ids, false), segments_text(render_chat(enc.chat_template(), kMultiTurn, false)));
  }
}

TEST(ChatTemplateLabels, TokensTakeLossWhenTheirFirstByteIsInALossSegment) {
  // Two-byte tokens over the joined text, as BPE merges across the segments of one string. plain joins
  // prompt and answer: "q" + "ab" is "qa","b": "qa" starts in the prompt and takes no loss, "b" does;
  // "qq" + "ab" is "qq","ab": the whole answer does.
  const TableTokenizer tok(kQwenSpecials, /*pairs=*/true);
  const ChatEncoder plain(tok, chat_template_for(ChatTemplateKind::plain, tok));
  EXPECT_EQ(labelled_text(tok, plain.encode({{"user", "q"}, {"assistant", "ab"}}, 4096)), "b<|endoftext|>");
  EXPECT_EQ(labelled_text(tok, plain.encode({{"user", "qq"}, {"assistant", "ab"}}, 4096)), "a<|endoftext|>");
  // chatml: "assistant\n" (10 bytes) then the answer: "xab" is "xa","b" (ids 'x', 'b'); the "\n" after
  // <|im_end|> takes none.
  const ChatEncoder chatml(tok, chat_template_for(ChatTemplateKind::chatml, tok));
  EXPECT_EQ(labelled_text(tok, chatml.encode({{"system", "s"}, {"user", "q"}, {"assistant", "xab"}, {"user", "r"},
                                              {"assistant", "yz"}}, 4096)),
            "xb<|im_end|>y<|im_end|>");
}

TEST(ChatTemplateLabels, PlainTextSamplesTakeLossEverywhereButTheirStart) {
  const Conversation text = {{kTextRole, "Once upon a time"}};
  {
    const ByteTokenizer tok;
    const TokenizedSample s = ChatEncoder(tok, chat_template_for(ChatTemplateKind::shardft, tok)).encode(text, 4096);
    EXPECT_EQ(tok.decode(s.input_ids), "<|bos|>Once upon a time<|end|>");
    EXPECT_EQ(s.labels.front(), kIgnore);
    EXPECT_EQ(labelled_text(tok, s), "Once upon a time<|end|>");
  }
  {
    const TableTokenizer tok(kQwenSpecials);
    const TokenizedSample s = ChatEncoder(tok, chat_template_for(ChatTemplateKind::chatml, tok)).encode(text, 4096);
    EXPECT_EQ(tok.decode(s.input_ids, false), "Once upon a time<|endoftext|>");  // Qwen2 has no bos
    EXPECT_EQ(labelled_text(tok, s), "Once upon a time<|endoftext|>");
  }
  {
    const TableTokenizer tok(kLlamaSpecials);
    const TokenizedSample s = ChatEncoder(tok, chat_template_for(ChatTemplateKind::llama3, tok)).encode(text, 4096);
    EXPECT_EQ(tok.decode(s.input_ids, false), "<|begin_of_text|>Once upon a time<|end_of_text|>");
    EXPECT_EQ(labelled_text(tok, s), "Once upon a time<|end_of_text|>");
  }
  {
    // plain picks the tokenizer's own beginning and end of text
    const TableTokenizer tok(kLlamaSpecials);
    const ChatTemplate plain = chat_template_for(ChatTemplateKind::plain, tok);
    EXPECT_EQ(plain.bos, "<|begin_of_text|>");
    EXPECT_EQ(plain.eos, "<|end_of_text|>");
    const TokenizedSample s = ChatEncoder(tok, plain).encode({{"user", "Q: 1+1? A:"}, {"assistant", " 2"}}, 4096);
    EXPECT_EQ(tok.decode(s.input_ids, false), "<|begin_of_text|>Q: 1+1? A: 2<|end_of_text|>");
    EXPECT_EQ(labelled_text(tok, s), " 2<|end_of_text|>");
  }
}

TEST(ChatTemplateLabels, TruncationCutsIdsAndLabelsTogether) {
  const TableTokenizer tok(kQwenSpecials);
  const ChatEncoder enc(tok, chat_template_for(ChatTemplateKind::chatml, tok));
  const TokenizedSample full = enc.encode(kMultiTurn, 4096);
  for (int limit : {1, 5, 30, static_cast<int>(full.input_ids.size()) - 1}) {
    const TokenizedSample cut = enc.encode(kMultiTurn, limit);
    ASSERT_EQ(cut.input_ids.size(), static_cast<std::size_t>(limit));
    EXPECT_TRUE(std::equal(cut.input_ids.begin(), cut.input_ids.end(), full.input_ids.begin()));
    EXPECT_TRUE(std::equal(cut.labels.begin(), cut.labels.end(), full.labels.begin()));
  }
  EXPECT_EQ(enc.encode(kMultiTurn, 100000).input_ids, full.input_ids);
  EXPECT_THROW(enc.encode(kMultiTurn, 0), std::invalid_argument);
}

// ---- generation, stop and pad ------------------------------------------------------------------

TEST(ChatTemplateGeneration, PromptIsTheSampleUpToTheAnswer) {
  for (ChatTemplateKind kind :
       {ChatTemplateKind::shardft, ChatTemplateKind::chatml, ChatTemplateKind::llama3, ChatTemplateKind::plain}) {
    SCOPED_TRACE(chat_template_name(kind));
    std::vector<std::string> specials = kind == ChatTemplateKind::llama3 ? kLlamaSpecials : kQwenSpecials;
    if (kind == ChatTemplateKind::shardft) specials = {"<|pad|>", "<|bos|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"};
    const TableTokenizer tok(specials);
    const ChatEncoder enc(tok, chat_template_for(kind, tok));
    const GenerationPrompt p = enc.generation_prompt(kMultiTurn);
    const TokenizedSample full = enc.encode(kMultiTurn, 4096);
    ASSERT_LT(p.prompt_ids.size(), full.input_ids.size());
    EXPECT_TRUE(std::equal(p.prompt_ids.begin(), p.prompt_ids.end(), full.input_ids.begin()));
    // What follows the prompt is the reference answer, then a stop token.
    Ids rest(full.input_ids.begin() + static_cast<std::ptrdiff_t>(p.prompt_ids.size()), full.input_ids.end());
    const auto stop = std::find_first_of(rest.begin(), rest.end(), enc.stop_ids().begin(), enc.stop_ids().end());
    ASSERT_NE(stop, rest.end());
    EXPECT_EQ(tok.decode(Ids(rest.begin(), stop), false), p.reference);
    EXPECT_EQ(p.reference, kind == ChatTemplateKind::llama3 ? "a2" : " a2 \n");
  }
  const ByteTokenizer tok;
  const ChatEncoder enc(tok, builtin_chat_template(ChatTemplateKind::shardft));
  EXPECT_FALSE(ChatEncoder::can_generate({{kTextRole, "text"}}));
  EXPECT_FALSE(ChatEncoder::can_generate({{"user", "q"}}));
  EXPECT_THROW(enc.generation_prompt({{kTextRole, "text"}}), DataError);
  EXPECT_THROW(enc.generation_prompt({}), DataError);
}

TEST(ChatTemplateGeneration, StopAndPadIds) {
  const ByteTokenizer byte;
  const ChatEncoder shardft(byte, chat_template_for(ChatTemplateKind::shardft, byte));
  EXPECT_EQ(shardft.stop_ids(), (Ids{ByteTokenizer::kEnd}));
  EXPECT_EQ(shardft.pad_id(), ByteTokenizer::kPad);
  const ChatEncoder byte_plain(byte, chat_template_for(ChatTemplateKind::plain, byte));
  EXPECT_EQ(byte_plain.stop_ids(), (Ids{ByteTokenizer::kEnd}));

  const TableTokenizer qwen(kQwenSpecials);  // no <|pad|>: pads with end-of-text
  const ChatEncoder chatml(qwen, chat_template_for(ChatTemplateKind::chatml, qwen));
  EXPECT_EQ(chatml.stop_ids(), (Ids{258, 256}));  // <|im_end|>, <|endoftext|>
  EXPECT_EQ(chatml.pad_id(), 256);
  EXPECT_EQ(chatml.describe(), "chat template chatml (stop: <|im_end|> <|endoftext|>; pad id 256)");

  const TableTokenizer llama(kLlamaSpecials);
  const ChatEncoder llama3(llama, chat_template_for(ChatTemplateKind::llama3, llama));
  EXPECT_EQ(llama3.stop_ids(), (Ids{260, 257}));  // <|eot_id|>, <|end_of_text|>
  EXPECT_EQ(llama3.pad_id(), 257);
}

// ---- errors ------------------------------------------------------------------------------------

TEST(ChatTemplateErrors, TokenizerWithoutTheTemplatesTokens) {
  const ByteTokenizer byte;
  EXPECT_EQ(message_of([&] { ChatEncoder(byte, chat_template_for(ChatTemplateKind::chatml, byte)); }),
            "chat_template chatml needs the token <|im_start|>, which the tokenizer byte does not have");
  EXPECT_CONTAINS(message_of([&] { ChatEncoder(byte, chat_template_for(ChatTemplateKind::llama3, byte)); }),
                  "chat_template llama3 needs the token <|begin_of_text|>, which the tokenizer byte");
  const TableTokenizer qwen(kQwenSpecials);
  EXPECT_CONTAINS(message_of([&] { ChatEncoder(qwen, chat_template_for(ChatTemplateKind::shardft, qwen)); }),
                  "chat_template shardft needs the token <|bos|>, which the tokenizer table");
  const TableTokenizer bare({"<|im_start|>", "<|im_end|>"});  // chatml without <|endoftext|>
  const ChatEncoder chatml(bare, chat_template_for(ChatTemplateKind::chatml, bare));
  EXPECT_NO_THROW(chatml.encode(kMultiTurn, 64));
  EXPECT_EQ(message_of([&] { chatml.encode({{kTextRole, "x"}}, 64); }),
            "chat_template chatml needs the token <|endoftext|>, which the tokenizer table does not have");
  EXPECT_CONTAINS(message_of([&] { chat_template_for(ChatTemplateKind::plain, bare); }),
                  "chat_template plain needs an end-of-text token");
  EXPECT_CONTAINS(message_of([&] { parse_chat_template_kind("vicuna"); }), "unknown chat_template 'vicuna'");
  EXPECT_CONTAINS(message_of([&] { render_chat(ChatTemplateKind::chatml, {{"bot", "x"}}, false); }),
                  "unknown role \"bot\"");
  EXPECT_CONTAINS(message_of([&] { render_chat(ChatTemplateKind::chatml, {{"user", "x"}, {kTextRole, "y"}}, false); }),
                  "plain-text turn must be the sample's only turn");
}

}  // namespace
}  // namespace shardft
