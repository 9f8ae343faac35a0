#pragma once
// Chat templates: a conversation rendered into segments of text, then tokenized with any tokenizer
// into a training sample with assistant-only labels, or into a generation prompt.
//
// The templates (recipe key chat_template; resolve_chat_template picks one):
//   auto     the default: the model's own Jinja chat_template from the tokenizer_config.json next to the
//            tokenizer (tokenizer_name_or_path, a directory or a tokenizer.json in one) when it has one,
//            else shardft (what the default was before templates could come from the model).
//   jinja    any Hugging Face Jinja chat template (jinja/template.hpp): `auto` as above, or
//            chat_template: /path/to/template.jinja (or a tokenizer_config.json file). Rendered exactly as
//            transformers' apply_chat_template renders it, with messages, add_generation_prompt,
//            bos_token / eos_token (from tokenizer_config.json, when it sets them), tools=None.
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
// <|bos|>; chatml: none; llama3: <|begin_of_text|>; plain: as above; jinja: its bos_token if any), the
// text, then end-of-text (shardft: <|end|>; chatml: <|endoftext|>; llama3: <|end_of_text|>; plain: as
// above; jinja: its eos_token), all with loss.
//
// Loss, built-in templates: an assistant turn's content and the token that ends the turn (<|end|>,
// <|im_end|>, <|eot_id|>; plain: the end-of-text token after a final assistant turn); nothing else.
// Loss, jinja templates (what transformers and trl take):
//   - with {% generation %} blocks: exactly the text the blocks render, which is what
//     apply_chat_template(return_assistant_tokens_mask=True) marks. Templates put the end-of-turn token
//     inside the block (as the built-in templates give it loss); one left outside takes no loss.
//   - without: for each assistant turn i, the text that render(turns[:i+1]) adds to
//     render(turns[:i], add_generation_prompt=True): the content, the end-of-turn token and whatever the
//     template writes after it up to the next turn (chatml: the "\n"), as trl's prompt-completion
//     masks do. Each of those renders must be a prefix of the next and of the whole conversation;
//     a template that rewrites earlier turns (e.g. drops reasoning, or a generation prompt the turn
//     does not repeat) is a DataError naming the template and the turn: give it generation blocks.
//   A token takes loss when any of its bytes is in such text (transformers' char_to_token rule).
//
// Tokenization joins consecutive text segments into one string and encodes it once, as HF renders the
// template to one string and tokenizes it (added tokens are split out first, and our special segments
// are exactly those); in the built-in templates a token takes loss when its first byte lies in a loss
// segment. Special segments become one id each through Tokenizer::special_token_id.
//
// Generation stops at the template's end of turn and end of text: built-in as listed at stop_ids();
// jinja: the special/added token that directly follows an assistant turn's content when the template
// renders one (found by rendering a probe answer), and eos_token.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/sft_data.hpp"
#include "tokenizer/tokenizer.hpp"

namespace shardft {

namespace jinja {
class Template;
}

enum class ChatTemplateKind { shardft, chatml, llama3, plain, jinja };

// "shardft" | "chatml" | "llama3" | "plain" (the built-in ones); anything else throws DataError naming
// the choices.
ChatTemplateKind parse_chat_template_kind(const std::string& name);
std::string chat_template_name(ChatTemplateKind kind);

struct ChatSegment {
  std::string text;
  bool special = false;     // one token: the tokenizer's special (or added) token whose content is `text`
  bool takes_loss = false;
};

// A template and its beginning/end-of-text tokens ("" bos: none; jinja: "" is left undefined).
struct ChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::shardft;
  std::string bos;
  std::string eos;
  std::shared_ptr<const jinja::Template> jinja_template;  // kind jinja: the parsed template
  std::string chosen_by;                         // how it was picked, for the log ("auto: dir/tokenizer_config.json")
};
// The template's own tokens; plain gets none for bos and "</s>" for eos (use chat_template_for).
ChatTemplate builtin_chat_template(ChatTemplateKind kind);
// The same, with plain's bos/eos taken from what the tokenizer has (DataError when it has no eos).
ChatTemplate chat_template_for(ChatTemplateKind kind, const Tokenizer& tok);

// A Jinja template from its source; `origin` names it in errors ("dir/tokenizer_config.json: chat_template").
ChatTemplate jinja_chat_template(const std::string& source, const std::string& origin, std::string bos, std::string eos);

// The chat_template setting resolved against the tokenizer (see the list at the top): "auto", a
// built-in name, or a path to a .jinja file or a tokenizer_config.json. DataError naming the file and
// key for an unreadable tokenizer_config.json, a chat_template that is neither a string nor a list of
// {name, template}, or a template that does not parse; and for a setting that is none of these.
ChatTemplate resolve_chat_template(const std::string& setting, const std::string& tokenizer_name_or_path,
                                   const Tokenizer& tok);

// The tokenizer_config.json that belongs with a tokenizer: in its directory, or next to its tokenizer.json;
// "" where there is none (and for the byte tokenizer).
std::string tokenizer_config_file(const std::string& tokenizer_name_or_path);

// "shardft", ..., or "jinja <origin> <hash of the source>": identifies the template in cache keys and logs.
std::string chat_template_label(const ChatTemplate& tmpl);

// The conversation as the template renders it. Roles must be system, user or assistant, or the
// conversation one kTextRole turn; DataError otherwise.
std::vector<ChatSegment> render_chat(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt);
std::vector<ChatSegment> render_chat(ChatTemplateKind kind, const Conversation& conv, bool add_generation_prompt);
// render_chat for kind jinja (chat_template_jinja.cpp): text segments only (the tokenizer splits the
// added tokens out), loss on the spans the header comment describes.
std::vector<ChatSegment> render_jinja_chat(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt);
// The text alone, as transformers' apply_chat_template(tokenize=False) gives it (no loss spans derived,
// so any template renders any conversation).
std::string render_jinja_text(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt);
// The segments' texts concatenated: the string HF's apply_chat_template(tokenize=False) gives.
std::string segments_text(const std::vector<ChatSegment>& segments);

// Python's str.strip(): Unicode whitespace off both ends of UTF-8 text (Jinja's `trim`).
std::string python_strip(const std::string& text);

// Which tokens of a conversation take loss: the assistant's (the template's rule, above), or every token
// of the rendered conversation (trl's assistant_only_loss / completion_only_loss false).
enum class LossOn { assistant, all };

// A tokenizer and a template together: samples, generation prompts, stop and pad ids.
class ChatEncoder {
 public:
  // Resolves the template's tokens in the tokenizer; DataError naming both when one is missing.
  ChatEncoder(const Tokenizer& tok, const ChatTemplate& tmpl);

  // Rendered, tokenized, labelled, truncated to max_seq_length tokens (std::invalid_argument if < 1).
  // LossOn::all labels every token; a Jinja template then renders the text alone (no assistant spans to
  // find, so any template will do).
  TokenizedSample encode(const Conversation& conv, int max_seq_length, LossOn on = LossOn::assistant) const;
  TokenizedSample encode_segments(const std::vector<ChatSegment>& segments, int max_seq_length) const;

  // What the model should generate for the conversation's last (assistant) turn: its content as the
  // template renders it (llama3: trimmed; jinja: the rendered turn up to its end-of-turn token).
  std::string reference_text(const Conversation& conv) const;

  // Whether the conversation ends in an assistant turn that generation can be scored against.
  static bool can_generate(const Conversation& conv);
  // Every turn but the last (the assistant's), rendered with the generation prompt; the reference is
  // the last turn's content as the template renders it (llama3: trimmed). DataError unless can_generate.
  GenerationPrompt generation_prompt(const Conversation& conv) const;

  // Generation stops at any of these (shardft <|end|>; chatml <|im_end|>, <|endoftext|>; llama3
  // <|eot_id|>, <|end_of_text|>; plain its end-of-text; jinja its end-of-turn token and eos_token),
  // those the tokenizer has.
  const std::vector<std::int32_t>& stop_ids() const { return stop_ids_; }
  // Fills padding: the tokenizer's <|pad|> when it has one, else end-of-text (any valid id would do).
  std::int32_t pad_id() const { return pad_id_; }
  const Tokenizer& tokenizer() const { return tok_; }
  const ChatTemplate& chat_template() const { return tmpl_; }
  // "chat template chatml (stop: <|im_end|> <|endoftext|>; pad id 151643)" for the startup log.
  std::string describe() const;

 private:
  std::int32_t id_of(const std::string& content) const;
  void find_jinja_stops();


  const Tokenizer& tok_;
  ChatTemplate tmpl_;
  std::map<std::string, std::int32_t> ids_;  // the template's tokens the tokenizer has
  std::vector<std::int32_t> stop_ids_;
  std::vector<std::string> stop_names_;
  std::string stop_note_;    // jinja: why no end-of-turn token was found, for describe()
  std::int32_t pad_id_ = 0;
};

}  // namespace shardft
