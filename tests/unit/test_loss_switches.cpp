// trl's loss switches: assistant_only_loss for conversations, completion_only_loss for prompt / completion
// records. Off, every token of the rendered sample is a target (labels = input_ids), for the built-in
// templates and for any Jinja template (whose text alone is rendered: no assistant spans need finding).
#include <gtest/gtest.h>

#include "config/train_config.hpp"
#include "data/datasets.hpp"
#include "data/training_set.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

const Conversation kChat = {{"system", "Be brief."}, {"user", "upper: abc"}, {"assistant", "ABC"}};

TEST(LossSwitches, OffEveryTokenIsATarget) {
  ByteTokenizer tok;
  for (ChatTemplateKind kind : {ChatTemplateKind::shardft, ChatTemplateKind::plain}) {
    const ChatEncoder enc(tok, chat_template_for(kind, tok));
    const TokenizedSample assistant = enc.encode(kChat, 256), all = enc.encode(kChat, 256, LossOn::all);
    EXPECT_EQ(all.input_ids, assistant.input_ids) << chat_template_name(kind);
    EXPECT_EQ(all.labels, all.input_ids) << chat_template_name(kind);
    int targets = 0;
    for (std::int32_t l : assistant.labels) targets += l != -100;  // PyTorch's ignore_index
    EXPECT_GT(targets, 0);
    EXPECT_LT(targets, static_cast<int>(assistant.labels.size())) << "the default leaves the prompt out";
  }
  // A Jinja template that rewrites earlier turns has no assistant spans to find; the whole text trains.
  const ChatTemplate rewriting = jinja_chat_template(
      "{% for m in messages %}{% if loop.last %}[final]{% endif %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
      "rewriting", "", "<|end|>");
  const ChatEncoder jinja(tok, rewriting);
  EXPECT_THROW(jinja.encode(kChat, 256), DataError);
  const TokenizedSample whole = jinja.encode(kChat, 256, LossOn::all);
  EXPECT_EQ(whole.labels, whole.input_ids);
  EXPECT_EQ(tok.decode(whole.input_ids), "system: Be brief.\nuser: upper: abc\n[final]assistant: ABC\n");
}

TEST(LossSwitches, EachSwitchGovernsItsKindOfRecord) {
  DatasetFileReport report;
  const std::vector<Conversation> set = read_dataset_text(
      "mixed.jsonl",
      "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"A\"}]}\n"
      "{\"prompt\": \"b\", \"completion\": \"B\"}\n",
      DatasetOptions{}, &report);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(report.prompt_completion, (std::vector<char>{0, 1}));
  TrainConfig cfg;
  EXPECT_EQ(loss_on(training_set_config(cfg).loss, false), LossOn::assistant);
  EXPECT_EQ(loss_on(training_set_config(cfg).loss, true), LossOn::assistant);
  cfg.assistant_only_loss = false;
  EXPECT_EQ(loss_on(training_set_config(cfg).loss, false), LossOn::all);
  EXPECT_EQ(loss_on(training_set_config(cfg).loss, true), LossOn::assistant);
  cfg.assistant_only_loss = true;
  cfg.completion_only_loss = false;
  EXPECT_EQ(loss_on(training_set_config(cfg).loss, false), LossOn::assistant);
  EXPECT_EQ(loss_on(training_set_config(cfg).loss, true), LossOn::all);
}

}  // namespace
}  // namespace shardft
