// The chat template and its two uses: training samples with assistant-only labels, and generation
// prompts that stop where the assistant's answer begins.
#include <stdexcept>
#include <string>
#include <utility>

#include "data/sft_data.hpp"

namespace shardft {
namespace {

constexpr std::int32_t kIgnore = -100;  // label that takes no loss (PyTorch's ignore_index)

// Roles come from read_conversations_jsonl already mapped; anything else is a caller's bug or a
// hand-built Conversation, and reported the same way as bad data.
std::int32_t role_token(const std::string& role) {
  if (role == "system") return ByteTokenizer::kSystem;
  if (role == "user") return ByteTokenizer::kUser;
  if (role == "assistant") return ByteTokenizer::kAssistant;
  throw DataError("chat template: unknown role \"" + role + "\" (expected system, user or assistant)");
}

// Appends <|role|> content <|end|>. Only the assistant's content and its closing <|end|> are labelled:
// the model learns to answer and to stop, never to imitate the user or the template markers.
void append_turn(const ByteTokenizer& tok, const Turn& turn, TokenizedSample& out) {
  const bool takes_loss = turn.role == "assistant";
  out.input_ids.push_back(role_token(turn.role));
  out.labels.push_back(kIgnore);
  for (std::int32_t id : tok.encode(turn.content)) {
    out.input_ids.push_back(id);
    out.labels.push_back(takes_loss ? id : kIgnore);
  }
  out.input_ids.push_back(ByteTokenizer::kEnd);
  out.labels.push_back(takes_loss ? ByteTokenizer::kEnd : kIgnore);
}

}  // namespace

TokenizedSample apply_chat_template(const ByteTokenizer& tok, const Conversation& conv, int max_seq_length) {
  if (max_seq_length <= 0) {
    throw std::invalid_argument("apply_chat_template: max_seq_length must be positive, got " +
                                std::to_string(max_seq_length));
  }
  TokenizedSample out;
  out.input_ids.push_back(ByteTokenizer::kBos);
  out.labels.push_back(kIgnore);
  for (const Turn& turn : conv) {
    append_turn(tok, turn, out);
    // Later turns would be cut anyway; stop rendering them.
    if (out.input_ids.size() >= static_cast<std::size_t>(max_seq_length)) break;
  }
  if (out.input_ids.size() > static_cast<std::size_t>(max_seq_length)) {
    out.input_ids.resize(max_seq_length);
    out.labels.resize(max_seq_length);
  }
  return out;
}

GenerationPrompt make_generation_prompt(const ByteTokenizer& tok, const Conversation& conv) {
  if (conv.empty()) throw DataError("generation prompt: empty conversation");
  if (conv.back().role != "assistant") {
    throw DataError("generation prompt: the last turn must be the assistant's reference answer, got role \"" +
                    conv.back().role + "\"");
  }
  TokenizedSample rendered;
  rendered.input_ids.push_back(ByteTokenizer::kBos);
  rendered.labels.push_back(kIgnore);
  for (std::size_t i = 0; i + 1 < conv.size(); ++i) append_turn(tok, conv[i], rendered);

  GenerationPrompt prompt;
  prompt.prompt_ids = std::move(rendered.input_ids);
  prompt.prompt_ids.push_back(ByteTokenizer::kAssistant);
  prompt.reference = conv.back().content;
  return prompt;
}

}  // namespace shardft
