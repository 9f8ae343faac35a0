#pragma once
// A run's chat template as Jinja source for transformers: what tokenizer_config.json's chat_template
// holds beside an exported model, so that apply_chat_template renders every conversation (system, user
// and assistant turns) to the text shardft rendered in training, and tokenizes it to the same ids.
// A Jinja template is its own source; a built-in one (data/chat_template.hpp) gets an equivalent with
// its tokens written out (plain: the tokenizer's, as chat_template_for chose them).
#include <string>

#include "data/chat_template.hpp"

namespace shardft {

std::string chat_template_jinja_source(const ChatTemplate& tmpl);

}  // namespace shardft
