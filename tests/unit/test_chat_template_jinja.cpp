// The model's own chat template (chat_template kind jinja): for each template written for the tests
// (tests/reference/jinja/*.jinja) and each conversation, the rendered text, the token ids and the loss
// mask equal transformers' (tests/reference/jinja_chat.json, made by make_jinja_chat_fixtures.py:
// return_assistant_tokens_mask for templates with generation blocks, trl-style prefix renders for the
// others); plus the selection (chat_template: auto, a file, a tokenizer_config.json), stop tokens and
// references for generation.
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/scratch_dir_test.hpp"
#include "data/chat_template.hpp"
#include "jinja/template.hpp"

namespace shardft {
namespace {

using json = nlohmann::ordered_json;
const std::string kRef = SHARDFT_REFERENCE_DIR;

const json& fixture() {
  static const json j = [] {
    std::ifstream in(kRef + "/jinja_chat.json");
    return json::parse(in);
  }();
  return j;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const json& template_entry(const std::string& name) {
  for (const json& t : fixture()["templates"]) {
    if (t["name"] == name) return t;
  }
  throw std::runtime_error("no template " + name + " in the fixture");
}

ChatTemplate fixture_template(const json& t) {
  return jinja_chat_template(read_file(kRef + "/" + t["file"].get<std::string>()), t["file"].get<std::string>(),
                             t["bos_token"].is_null() ? "" : t["bos_token"].get<std::string>(),
                             t["eos_token"].is_null() ? "" : t["eos_token"].get<std::string>());
}

Conversation conversation(const json& messages) {
  Conversation conv;
  for (const json& m : messages) conv.push_back({m["role"], m["content"]});
  return conv;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

class JinjaChatTemplate : public ::testing::TestWithParam<std::string> {};

TEST_P(JinjaChatTemplate, TextIdsAndMaskEqualTransformers) {
  const json& t = template_entry(GetParam());
  const std::unique_ptr<Tokenizer> tok = load_tokenizer(kRef + "/" + t["tokenizer"].get<std::string>());
  const ChatTemplate tmpl = fixture_template(t);
  EXPECT_EQ(tmpl.jinja_template->has_generation_blocks(), t["generation_blocks"].get<bool>());
  const ChatEncoder enc(*tok, tmpl);
  int compared = 0, masks = 0;
  for (const json& c : fixture()["cases"]) {
    if (c["template"] != GetParam()) continue;
    SCOPED_TRACE(c["conversation"].get<std::string>());
    const Conversation conv = conversation(c["messages"]);
    const bool gp = c["add_generation_prompt"];
    if (c.contains("error")) {  // the template's raise_exception
      const std::string message = error_of([&] { render_chat(tmpl, conv, gp); });
      EXPECT_NE(message.find(t["file"].get<std::string>() + ", line "), std::string::npos) << message;
      EXPECT_NE(message.find("the template raised an exception: " + c["error"].get<std::string>()), std::string::npos)
          << message;
      continue;
    }
    if (c.contains("prefix_error_turn")) {  // trl's way cannot find this template's assistant text
      const std::string message = error_of([&] { enc.encode(conv, 1 << 20); });
      const std::string turn = "turn " + std::to_string(c["prefix_error_turn"].get<int>() + 1) + ":";
      EXPECT_NE(message.find(t["file"].get<std::string>() + ": cannot find the assistant text of " + turn),
                std::string::npos)
          << message;
      continue;
    }
    EXPECT_EQ(segments_text(render_chat(tmpl, conv, gp)), c["text"].get<std::string>());
    const TokenizedSample s = enc.encode_segments(render_chat(tmpl, conv, gp), 1 << 20);
    EXPECT_EQ(s.input_ids, c["ids"].get<std::vector<std::int32_t>>());
    ++compared;
    if (!c.contains("mask")) continue;
    std::vector<int> mask;
    for (std::size_t k = 0; k < s.labels.size(); ++k) {
      mask.push_back(s.labels[k] != -100);
      if (s.labels[k] != -100) {
        EXPECT_EQ(s.labels[k], s.input_ids[k]);
      }
    }
    EXPECT_EQ(mask, c["mask"].get<std::vector<int>>()) << c["mask_source"];
    ++masks;
  }
  EXPECT_GT(compared, 0);
  if (GetParam() != "reasoning") {  // whose every conversation is the prefix error
    EXPECT_GT(masks, 0);
  }
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const json& t : fixture()["templates"]) names.push_back(t["name"]);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fixture, JinjaChatTemplate, ::testing::ValuesIn(template_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---- stop tokens, references, plain text ---------------------------------------------------------

struct Loaded {
  std::unique_ptr<Tokenizer> tok;
  ChatTemplate tmpl;
};
Loaded load(const std::string& name) {
  const json& t = template_entry(name);
  return {load_tokenizer(kRef + "/" + t["tokenizer"].get<std::string>()), fixture_template(t)};
}

TEST(JinjaChatStops, EndOfTurnTokenIsTheSpecialTokenAfterTheAnswer) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected = {
      {"chatml_generation", {"<|im_end|>"}},               // eos is <|im_end|> too
      {"llama3_headers", {"<|eot_id|>"}},                  // eos <|eot_id|>
      {"mistral_inst", {"</s>"}},                          // the answer ends with eos_token
      {"gemma_macro", {"<|im_end|>", "<|endoftext|>"}},    // end of turn, then the eos
      {"phi_blocks", {"<|end|>", "</s>"}},
  };
  for (const auto& [name, stops] : expected) {
    SCOPED_TRACE(name);
    const Loaded l = load(name);
    const ChatEncoder enc(*l.tok, l.tmpl);
    std::vector<std::int32_t> ids;
    for (const std::string& s : stops) ids.push_back(l.tok->special_token_id(s));
    EXPECT_EQ(enc.stop_ids(), ids);
    EXPECT_NE(enc.describe().find("chat template jinja jinja/" + name + ".jinja "), std::string::npos) << enc.describe();
  }
  // zephyr_plain: "</s>" ends the turn and is the eos: one stop.
  const Loaded z = load("zephyr_plain");
  EXPECT_EQ(ChatEncoder(*z.tok, z.tmpl).stop_ids(), std::vector<std::int32_t>{z.tok->special_token_id("</s>")});
}

TEST(JinjaChatStops, GenerationPromptAndReferenceAreWhatTheTemplateRenders) {
  const Loaded l = load("llama3_headers");
  const ChatEncoder enc(*l.tok, l.tmpl);
  const Conversation conv = {{"user", "  Q "}, {"assistant", "  the answer\n"}};
  const GenerationPrompt p = enc.generation_prompt(conv);
  EXPECT_EQ(l.tok->decode(p.prompt_ids), "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
                                         "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(p.reference, "the answer");  // the template trims it; the <|eot_id|> is where generation stops
}

TEST(JinjaChatStops, PlainTextSamplesAreBosTextEosWithLoss) {
  const Loaded l = load("llama3_headers");
  const ChatEncoder enc(*l.tok, l.tmpl);
  const TokenizedSample s = enc.encode({{kTextRole, "hello"}}, 64);
  ASSERT_GE(s.input_ids.size(), 3u);
  EXPECT_EQ(s.input_ids.front(), l.tok->special_token_id("<|begin_of_text|>"));
  EXPECT_EQ(s.labels.front(), -100);
  EXPECT_EQ(s.input_ids.back(), l.tok->special_token_id("<|eot_id|>"));
  for (std::size_t k = 1; k < s.labels.size(); ++k) EXPECT_EQ(s.labels[k], s.input_ids[k]);
}

// ---- selection ---------------------------------------------------------------------------------------

class ChatTemplateSelection : public testing_util::ScratchDirTest {
 protected:
  // A model directory: the qwen2-style tokenizer.json and the given tokenizer_config.json.
  std::string model_dir(const json& config) {
    std::filesystem::copy_file(kRef + "/bpe/qwen2_style/tokenizer.json", dir_ / "tokenizer.json");
    write("tokenizer_config.json", config.dump());
    return dir_.string();
  }
  std::string chatml() { return read_file(kRef + "/jinja/chatml_generation.jinja"); }
};

TEST_F(ChatTemplateSelection, AutoTakesTheTokenizerConfigsTemplate) {
  const std::string dir = model_dir({{"chat_template", chatml()}, {"bos_token", nullptr},
                                     {"eos_token", {{"content", "<|im_end|>"}, {"special", true}}}});
  const auto tok = load_tokenizer(dir);
  for (const std::string& path : {dir, dir + "/tokenizer.json"}) {
    const ChatTemplate t = resolve_chat_template("auto", path, *tok);
    ASSERT_EQ(t.kind, ChatTemplateKind::jinja);
    EXPECT_EQ(t.jinja_template->origin(), dir + "/tokenizer_config.json: chat_template");
    EXPECT_EQ(t.bos, "");
    EXPECT_EQ(t.eos, "<|im_end|>");
    EXPECT_NE(t.chosen_by.find("auto: the chat_template of " + dir + "/tokenizer_config.json"), std::string::npos);
    EXPECT_EQ(chat_template_label(t).rfind("jinja " + dir + "/tokenizer_config.json: chat_template ", 0), 0u);
  }
}

TEST_F(ChatTemplateSelection, AutoTakesTheDefaultOfATemplateList) {
  const std::string dir = model_dir({{"chat_template", json::array({{{"name", "tool_use"}, {"template", "{{ 'tools' }}"}},
                                                                    {{"name", "default"}, {"template", chatml()}}})}});
  const auto tok = load_tokenizer(dir);
  const ChatTemplate t = resolve_chat_template("auto", dir, *tok);
  EXPECT_EQ(t.jinja_template->source(), chatml());
  write("tokenizer_config.json", json({{"chat_template", json::array({{{"name", "tool_use"}, {"template", "x"}}})}}).dump());
  EXPECT_EQ(error_of([&] { resolve_chat_template("auto", dir, *tok); }),
            dir + "/tokenizer_config.json: chat_template: the list has no template named \"default\" (it has tool_use)");
}

TEST_F(ChatTemplateSelection, AutoWithoutATemplateIsTheOldDefault) {
  const std::string dir = model_dir({{"eos_token", "<|im_end|>"}});
  const auto tok = load_tokenizer(dir);
  const ChatTemplate t = resolve_chat_template("auto", dir, *tok);
  EXPECT_EQ(t.kind, ChatTemplateKind::shardft);
  EXPECT_NE(t.chosen_by.find("has no chat_template"), std::string::npos);
  const auto bytes = load_tokenizer("byte");
  const ChatTemplate byte_default = resolve_chat_template("auto", "byte", *bytes);
  EXPECT_EQ(byte_default.kind, ChatTemplateKind::shardft);
  EXPECT_EQ(ChatEncoder(*bytes, byte_default).describe(), "chat template shardft (stop: <|end|>; pad id 256)");
  EXPECT_EQ(resolve_chat_template("chatml", dir, *tok).kind, ChatTemplateKind::chatml);  // built-ins still win
}

TEST_F(ChatTemplateSelection, AFileOrATokenizerConfigPath) {
  const std::string dir = model_dir({{"bos_token", "<|endoftext|>"}, {"eos_token", "<|im_end|>"}});
  const auto tok = load_tokenizer(dir);
  const std::string file = write("my.jinja", chatml());
  ChatTemplate t = resolve_chat_template(file, dir, *tok);
  ASSERT_EQ(t.kind, ChatTemplateKind::jinja);
  EXPECT_EQ(t.jinja_template->origin(), file);
  EXPECT_EQ(t.bos, "<|endoftext|>");  // the special tokens come from the tokenizer's config
  const std::string config = write("other_config.json", json({{"chat_template", "{{ 'x' }}"}}).dump());
  t = resolve_chat_template(config, dir, *tok);
  EXPECT_EQ(t.jinja_template->origin(), config + ": chat_template");
}

TEST_F(ChatTemplateSelection, ErrorsNameTheFileAndKey) {
  const auto tok = load_tokenizer("byte");
  EXPECT_EQ(error_of([&] { resolve_chat_template("chatml3", "byte", *tok); }),
            "unknown chat_template 'chatml3' (expected auto, shardft, chatml, llama3, plain, or the path of a .jinja "
            "file or a tokenizer_config.json)");
  const std::string dir = model_dir({{"chat_template", 42}});
  const auto bpe = load_tokenizer(dir);
  EXPECT_EQ(error_of([&] { resolve_chat_template("auto", dir, *bpe); }),
            dir + "/tokenizer_config.json: chat_template: expected a string or a list of {\"name\", \"template\"}");
  write("tokenizer_config.json", "{not json");
  EXPECT_EQ(error_of([&] { resolve_chat_template("auto", dir, *bpe); }).rfind(dir + "/tokenizer_config.json: not valid JSON", 0), 0u);
  write("tokenizer_config.json", json({{"chat_template", "{% for m in messages %}{{ m.content"}}).dump());
  EXPECT_EQ(error_of([&] { resolve_chat_template("auto", dir, *bpe); }),
            dir + "/tokenizer_config.json: chat_template, line 1 column 24: the tag is not closed (missing '}}')");
}

}  // namespace
}  // namespace shardft
