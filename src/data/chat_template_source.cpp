#include "data/chat_template_source.hpp"

#include "jinja/template.hpp"

namespace shardft {

namespace {
// A Jinja string literal of `text` (the tokens hold no quotes or backslashes; checked anyway).
std::string literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}
}  // namespace

std::string chat_template_jinja_source(const ChatTemplate& tmpl) {
  const std::string gen_open = "{% if add_generation_prompt %}", gen_close = "{% endif %}";
  switch (tmpl.kind) {
    case ChatTemplateKind::jinja:
      return tmpl.jinja_template->source();
    case ChatTemplateKind::shardft:
      // <|bos|>, then <|role|>content<|end|> per turn; the prompt <|assistant|>.
      return "{{ " + literal(tmpl.bos) + " }}{% for message in messages %}{{ '<|' + message['role'] + '|>' + "
             "message['content'] + '<|end|>' }}{% endfor %}" + gen_open + "{{ '<|assistant|>' }}" + gen_close;
    case ChatTemplateKind::chatml:
      // Qwen2-Instruct's: a default system turn unless the first turn is one.
      return "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
             "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
             "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}" +
             gen_open + "{{ '<|im_start|>assistant\\n' }}" + gen_close;
    case ChatTemplateKind::llama3:
      // Llama-3-Instruct's: the begin-of-text token once, each turn's content trimmed.
      return "{{ " + literal(tmpl.bos) + " }}{% for message in messages %}{{ '<|start_header_id|>' + "
             "message['role'] + '<|end_header_id|>\\n\\n' + (message['content'] | trim) + '<|eot_id|>' }}"
             "{% endfor %}" + gen_open + "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}" + gen_close;
    case ChatTemplateKind::plain:
      // The turns back to back between the tokenizer's begin and end of text; a prompt has no end.
      return (tmpl.bos.empty() ? std::string() : "{{ " + literal(tmpl.bos) + " }}") +
             "{% for message in messages %}{{ message['content'] }}{% endfor %}{% if not add_generation_prompt %}"
             "{{ " + literal(tmpl.eos) + " }}{% endif %}";
  }
  return "";
}

}  // namespace shardft
