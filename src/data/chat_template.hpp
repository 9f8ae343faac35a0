#pragma once
// Chat templates: a conversation rendered into segments of text, then tokenized with any tokenizer
// into a training sample with assistant-only labels, or into a generation prompt.
//
// The templates (recipe key chat_template):
//   shardft  the built-in byte template: <|bos|>, then per turn <|role|> content <|end|>.
//   chatml   Qwen2-Instruct's template, exactly: when the first turn is not a system turn,
//            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"; then per turn
//            "<|im_start|>{role}\n{content}<|im_end|>\n"; generation prompt "<|im_start|>assistant\n".
//            (Qwen2.5-Instruct's template differs only in its default system text, "You are Qwen,
//            created by Alibaba Cloud. You are a helpful assistant.", and in tool calls: give every
//            conversation a system turn and the two render alike.)
//   llama3   Llama-3-Instruct's template, exactly: <|begin_of_text|> once, then per turn
//            "<|start_header_id|>{role}<|end_header_id|>\n\n{content|trim}<|eot_id|>" (trim: Python's
//            str.strip(), Unicode whitespace); generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n".
//   plain    no markers, for base models: the tokenizer's beginning-of-text token when it has one
//            (<|begin_of_text|>, <s> or <|bos|>), the turns' contents back to back with nothing between
//            them (prompt, then completion), then its end-of-text token (<|end_of_text|>, <|endoftext|>,
//            </s> or <|end|>, the first it has). A generation prompt is the same without the end token.
// Plain-text samples (trl's `text` datasets) render in every template as beginning-of-text (shardft:
// <|bos|>; chatml: none; llama3: <|begin_of_text|>; plain: as above), the text, then end-of-text
// (shardft: <|end|>; chatml: <|endoftext|>; llama3: <|end_of_text|>; plain: as above), all with loss.
//
// Loss: an assistant turn's content and the token that ends the turn (<|end|>, <|im_end|>,
// <|eot_id|>; plain: the end-of-text token after a final assistant turn); nothing else of a conversation.
//
// Tokenization joins consecutive text segments into one string and encodes it once, as HF renders the
// template to one string and tokenizes it (added tokens are split out first, and our special segments
// are exactly those); a token takes loss when its first byte lies in a loss segment. Special segments
// become one id each through Tokenizer::special_token_id.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/sft_data.hpp"
#include "data/tokenizer.hpp"

namespace shardft {

enum class ChatTemplateKind { shardft, chatml, llama3, plain };

// "shardft" | "chatml" | "llama3" | "plain"; anything else throws DataError naming the choices.
ChatTemplateKind parse_chat_template_kind(const std::string& name);
std::string chat_template_name(ChatTemplateKind kind);

struct ChatSegment {
  std::string text;
  bool special = false;     // one token: the tokenizer's special (or added) token whose content is `text`
  bool takes_loss = false;
};

// A template and its beginning/end-of-text tokens ("" bos: none).
struct ChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::shardft;
  std::string bos;
  std::string eos;
};
// The template's own tokens; plain gets none for bos and "</s>" for eos (use chat_template_for).
ChatTemplate builtin_chat_template(ChatTemplateKind kind);
// The same, with plain's bos/eos taken from what the tokenizer has (DataError when it has no eos).
ChatTemplate chat_template_for(ChatTemplateKind kind, const Tokenizer& tok);

// The conversation as the template renders it. Roles must be system, user or assistant, or the
// conversation one kTextRole turn; DataError otherwise.
std::vector<ChatSegment> render_chat(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt);
std::vector<ChatSegment> render_chat(ChatTemplateKind kind, const Conversation& conv, bool add_generation_prompt);
// The segments' texts concatenated: the string HF's apply_chat_template(tokenize=False) gives.
std::string segments_text(const std::vector<ChatSegment>& segments);

// Python's str.strip(): Unicode whitespace off both ends of UTF-8 text (Jinja's `trim`).
std::string python_strip(const std::string& text);

// A tokenizer and a template together: samples, generation prompts, stop and pad ids.
class ChatEncoder {
 public:
  // Resolves the template's tokens in the tokenizer; DataError naming both when one is missing.
  ChatEncoder(const Tokenizer& tok, const ChatTemplate& tmpl);

  // Rendered, tokenized, labelled, truncated to max_seq_length tokens (std::invalid_argument if < 1).
  TokenizedSample encode(const Conversation& conv, int max_seq_length) const;
  TokenizedSample encode_segments(const std::vector<ChatSegment>& segments, int max_seq_length) const;

  // Whether the conversation ends in an assistant turn that generation can be scored against.
  static bool can_generate(const Conversation& conv);
  // Every turn but the last (the assistant's), rendered with the generation prompt; the reference is
  // the last turn's content as the template renders it (llama3: trimmed). DataError unless can_generate.
  GenerationPrompt generation_prompt(const Conversation& conv) const;

  // Generation stops at any of these (shardft <|end|>; chatml <|im_end|>, <|endoftext|>; llama3
  // <|eot_id|>, <|end_of_text|>; plain its end-of-text), those the tokenizer has.
  const std::vector<std::int32_t>& stop_ids() const { return stop_ids_; }
  // Fills padding: the tokenizer's <|pad|> when it has one, else end-of-text (any valid id would do).
  std::int32_t pad_id() const { return pad_id_; }
  const Tokenizer& tokenizer() const { return tok_; }
  const ChatTemplate& chat_template() const { return tmpl_; }
  // "chat template chatml (stop: <|im_end|> <|endoftext|>; pad id 151643)" for the startup log.
  std::string describe() const;

 private:
  std::int32_t id_of(const std::string& content) const;

  const Tokenizer& tok_;
  ChatTemplate tmpl_;
  std::map<std::string, std::int32_t> ids_;  // the template's tokens the tokenizer has
  std::vector<std::int32_t> stop_ids_;
  std::vector<std::string> stop_names_;
  std::int32_t pad_id_ = 0;
};

}  // namespace shardft
