// The Jinja source an export's tokenizer_config.json carries renders, in shardft's Jinja engine (which
// renders as transformers does, test_chat_template_jinja), exactly what the built-in template rendered in
// training, and tokenizes to the same ids with the model's own tokenizer: Qwen2's BPE for chatml and
// plain, Llama 3's for llama3 and plain; the byte tokenizer's shardft template as text.
#include <gtest/gtest.h>

#include "data/chat_template_source.hpp"
#include "tokenizer/tokenizer.hpp"

namespace shardft {
namespace {

const std::vector<Conversation>& conversations() {
  static const std::vector<Conversation> c = {
      {{"user", "upper: hello"}, {"assistant", "HELLO"}},
      {{"system", "Be brief."}, {"user", "  spaced  \n"}, {"assistant", " Grüße, 東京 🙂 \t"}},
      {{"user", "one"}, {"assistant", "1"}, {"user", "two"}, {"assistant", "2"}},
  };
  return c;
}

// The text for every conversation, with and without the generation prompt; with an HF tokenizer (which
// splits the added tokens out of the text, as transformers tokenizes a rendered template) the ids too.
void expect_same_rendering(const Tokenizer& tok, const ChatTemplate& builtin, bool hf_tokenizer) {
  SCOPED_TRACE(chat_template_name(builtin.kind) + " with bos '" + builtin.bos + "'");
  const ChatTemplate exported = jinja_chat_template(chat_template_jinja_source(builtin), "export", builtin.bos, builtin.eos);
  const ChatEncoder ours(tok, builtin);
  for (const Conversation& conv : conversations()) {
    Conversation prompt_turns = conv;
    prompt_turns.pop_back();
    const std::string text = render_jinja_text(exported, conv, false);
    const std::string prompt = render_jinja_text(exported, prompt_turns, true);
    EXPECT_EQ(text, segments_text(render_chat(builtin, conv, false)));
    EXPECT_EQ(prompt, segments_text(render_chat(builtin, prompt_turns, true)));
    if (!hf_tokenizer) continue;
    EXPECT_EQ(tok.encode(text), ours.encode(conv, 512).input_ids);
    EXPECT_EQ(tok.encode(prompt), ours.generation_prompt(conv).prompt_ids);
  }
}

TEST(ChatTemplateSource, BuiltInTemplatesRenderAlikeAsJinja) {
  const std::string ref = SHARDFT_REFERENCE_DIR "/hf/";
  const auto qwen = load_tokenizer(ref + "tiny_qwen2/tokenizer.json");
  const auto llama = load_tokenizer(ref + "tiny_llama/tokenizer.json");
  ByteTokenizer bytes;
  expect_same_rendering(*qwen, chat_template_for(ChatTemplateKind::chatml, *qwen), true);
  expect_same_rendering(*llama, chat_template_for(ChatTemplateKind::llama3, *llama), true);
  expect_same_rendering(*llama, chat_template_for(ChatTemplateKind::plain, *llama), true);
  expect_same_rendering(*qwen, chat_template_for(ChatTemplateKind::plain, *qwen), true);  // no begin-of-text token
  // The byte tokenizer has no tokenizer.json for transformers; the text alone.
  expect_same_rendering(bytes, chat_template_for(ChatTemplateKind::shardft, bytes), false);
}

TEST(ChatTemplateSource, AJinjaTemplateIsItsOwnSource) {
  const std::string source = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
  EXPECT_EQ(chat_template_jinja_source(jinja_chat_template(source, "x", "", "")), source);
}

}  // namespace
}  // namespace shardft
