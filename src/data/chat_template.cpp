// The chat templates (see chat_template.hpp), their tokenization with assistant-only labels, and
// generation prompts that stop where the assistant's answer begins.
#include "data/chat_template.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace shardft {
namespace {

constexpr std::int32_t kIgnore = -100;  // label that takes no loss (PyTorch's ignore_index)

// Qwen2-Instruct's default system message, added when the first turn is not a system turn.
constexpr char kQwen2DefaultSystem[] = "You are a helpful assistant.";

// In the order they are tried for the plain template.
const char* const kBeginOfTextTokens[] = {"<|begin_of_text|>", "<s>", "<|bos|>"};
const char* const kEndOfTextTokens[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", "<|end|>"};

bool known_role(const std::string& role) { return role == "system" || role == "user" || role == "assistant"; }

// Roles come from the dataset reader already mapped; anything else is a hand-built Conversation, and
// reported the same way as bad data.
void check_roles(const Conversation& conv) {
  if (is_text_sample(conv)) return;
  for (const Turn& turn : conv) {
    if (known_role(turn.role)) continue;
    if (turn.role == kTextRole) throw DataError("chat template: a plain-text turn must be the sample's only turn");
    throw DataError("chat template: unknown role \"" + turn.role + "\" (expected system, user or assistant)");
  }
}

class Segments {
 public:
  Segments& special(const std::string& token, bool loss = false) {
    out_.push_back({token, true, loss});
    return *this;
  }
  Segments& text(std::string text, bool loss = false) {
    if (!text.empty()) out_.push_back({std::move(text), false, loss});
    return *this;
  }
  std::vector<ChatSegment> take() { return std::move(out_); }

 private:
  std::vector<ChatSegment> out_;
};

// Decodes the code point at text[i..] (advancing i); false for bytes that are not valid UTF-8.
bool next_code_point(const std::string& text, std::size_t& i, char32_t& cp) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > text.size()) return false;
  cp = len == 1 ? b0 : len == 2 ? (b0 & 0x1F) : len == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b >> 6) != 0x2) return false;
    cp = (cp << 6) | (b & 0x3F);
  }
  i += len;
  return true;
}

// Python's str.isspace() (Unicode 15, as in CPython 3.11): bidirectional classes WS, B, S and category Zs.
bool python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// transformers' assistant mask (apply_chat_template with return_assistant_tokens_mask): for each loss
// range [a, b) of the text, the tokens from char_to_token(a) to char_to_token(b - 1), where
// char_to_token is the first token whose HF offsets (TokenSpan::hf_begin / hf_end: whole characters; a
// composed character's first code point) hold the byte. Kept as it is, quirks included: a range whose
// first byte no token holds ends the marking; one whose last byte no token holds (a combining mark NFC
// absorbed, say) or token 0 marks up to the end. A token that covers no bytes (the "▁" a Metaspace
// pre-tokenizer puts before a word) has, in HF's offsets, the span of the token that follows it at the
// same place.
std::vector<char> transformers_mask(const std::vector<std::pair<std::size_t, bool>>& parts, std::size_t text_size,
                                    const std::vector<TokenSpan>& token_spans) {
  std::vector<TokenSpan> spans(token_spans.size());
  for (std::size_t k = 0; k < spans.size(); ++k) spans[k] = {token_spans[k].hf_begin, token_spans[k].hf_end};
  for (std::size_t k = spans.size(); k-- > 0;) {
    if (spans[k].begin == spans[k].end && k + 1 < spans.size() && spans[k + 1].begin == spans[k].begin) {
      spans[k].end = spans[k + 1].end;
    }
  }
  std::vector<char> mask(spans.size(), 0);
  auto char_to_token = [&](std::size_t byte) -> std::ptrdiff_t {
    for (std::size_t k = 0; k < spans.size(); ++k) {
      if (spans[k].begin <= byte && byte < spans[k].end) return static_cast<std::ptrdiff_t>(k);
    }
    return -1;
  };
  for (std::size_t p = 0; p < parts.size(); ++p) {
    if (!parts[p].second) continue;
    const std::size_t begin = parts[p].first;
    while (p + 1 < parts.size() && parts[p + 1].second) ++p;  // adjacent loss parts are one range
    const std::size_t end = p + 1 < parts.size() ? parts[p + 1].first : text_size;
    if (end <= begin) continue;
    const std::ptrdiff_t first = char_to_token(begin), last = char_to_token(end - 1);
    if (first < 0) break;
    const std::size_t stop = last > 0 ? static_cast<std::size_t>(last) + 1 : spans.size();
    for (std::size_t k = static_cast<std::size_t>(first); k < stop; ++k) mask[k] = 1;
  }
  return mask;
}

}  // namespace

std::string python_strip(const std::string& text) {
  // Code point boundaries from the front; then the longest all-space prefix and suffix.
  std::vector<std::pair<std::size_t, bool>> points;  // (start byte, is space)
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    char32_t cp = 0;
    if (!next_code_point(text, i, cp)) {
      i = start + 1;
      points.push_back({start, false});
    } else {
      points.push_back({start, python_space(cp)});
    }
  }
  std::size_t first = 0, last = points.size();
  while (first < last && points[first].second) ++first;
  while (last > first && points[last - 1].second) --last;
  if (first == last) return "";
  const std::size_t begin = points[first].first;
  const std::size_t end = last < points.size() ? points[last].first : text.size();
  return text.substr(begin, end - begin);
}

ChatTemplateKind parse_chat_template_kind(const std::string& name) {
  if (name == "shardft") return ChatTemplateKind::shardft;
  if (name == "chatml") return ChatTemplateKind::chatml;
  if (name == "llama3") return ChatTemplateKind::llama3;
  if (name == "plain") return ChatTemplateKind::plain;
  throw DataError("unknown chat_template '" + name + "' (expected shardft, chatml, llama3 or plain)");
}

std::string chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::shardft: return "shardft";
    case ChatTemplateKind::chatml: return "chatml";
    case ChatTemplateKind::llama3: return "llama3";
    case ChatTemplateKind::plain: return "plain";
    case ChatTemplateKind::jinja: return "jinja";
  }
  return "?";
}

ChatTemplate builtin_chat_template(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::shardft: return {kind, "<|bos|>", "<|end|>", nullptr, ""};
    case ChatTemplateKind::chatml: return {kind, "", "<|endoftext|>", nullptr, ""};
    case ChatTemplateKind::llama3: return {kind, "<|begin_of_text|>", "<|end_of_text|>", nullptr, ""};
    case ChatTemplateKind::plain: return {kind, "", "</s>", nullptr, ""};
    case ChatTemplateKind::jinja: break;
  }
  throw DataError("a jinja chat template has no built-in form: it comes from a tokenizer_config.json or a .jinja file");
}

ChatTemplate chat_template_for(ChatTemplateKind kind, const Tokenizer& tok) {
  ChatTemplate t = builtin_chat_template(kind);
  if (kind != ChatTemplateKind::plain) return t;
  t.bos.clear();
  for (const char* bos : kBeginOfTextTokens) {
    if (tok.special_token_id(bos) >= 0) {
      t.bos = bos;
      break;
    }
  }
  t.eos.clear();
  for (const char* eos : kEndOfTextTokens) {
    if (tok.special_token_id(eos) >= 0) {
      t.eos = eos;
      break;
    }
  }
  if (t.eos.empty()) {
    std::string names;
    for (const char* eos : kEndOfTextTokens) names += (names.empty() ? "" : ", ") + std::string(eos);
    throw DataError("chat_template plain needs an end-of-text token (" + names + "); the tokenizer " +
                    tok.fingerprint() + " has none of them");
  }
  return t;
}

std::vector<ChatSegment> render_chat(ChatTemplateKind kind, const Conversation& conv, bool add_generation_prompt) {
  return render_chat(builtin_chat_template(kind), conv, add_generation_prompt);
}

std::vector<ChatSegment> render_chat(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt) {
  check_roles(conv);
  if (tmpl.kind == ChatTemplateKind::jinja) return render_jinja_chat(tmpl, conv, add_generation_prompt);
  Segments out;
  if (is_text_sample(conv)) {
    if (!tmpl.bos.empty()) out.special(tmpl.bos);
    out.text(conv[0].content, true);
    out.special(tmpl.eos, true);
    return out.take();
  }
  switch (tmpl.kind) {
    case ChatTemplateKind::shardft:
      out.special(tmpl.bos);
      for (const Turn& turn : conv) {
        const bool loss = turn.role == "assistant";
        out.special("<|" + turn.role + "|>").text(turn.content, loss).special("<|end|>", loss);
      }
      if (add_generation_prompt) out.special("<|assistant|>");
      break;
    case ChatTemplateKind::chatml:
      for (std::size_t i = 0; i < conv.size(); ++i) {
        if (i == 0 && conv[0].role != "system") {
          out.special("<|im_start|>").text(std::string("system\n") + kQwen2DefaultSystem).special("<|im_end|>").text("\n");
        }
        const bool loss = conv[i].role == "assistant";
        out.special("<|im_start|>").text(conv[i].role + "\n").text(conv[i].content, loss);
        out.special("<|im_end|>", loss).text("\n");
      }
      if (add_generation_prompt) out.special("<|im_start|>").text("assistant\n");
      break;
    case ChatTemplateKind::llama3:
      for (std::size_t i = 0; i < conv.size(); ++i) {
        if (i == 0) out.special(tmpl.bos);
        const bool loss = conv[i].role == "assistant";
        out.special("<|start_header_id|>").text(conv[i].role).special("<|end_header_id|>").text("\n\n");
        out.text(python_strip(conv[i].content), loss).special("<|eot_id|>", loss);
      }
      if (add_generation_prompt) {
        out.special("<|start_header_id|>").text("assistant").special("<|end_header_id|>").text("\n\n");
      }
      break;
    case ChatTemplateKind::plain:
      if (!tmpl.bos.empty()) out.special(tmpl.bos);
      for (const Turn& turn : conv) out.text(turn.content, turn.role == "assistant");
      if (!add_generation_prompt) out.special(tmpl.eos, !conv.empty() && conv.back().role == "assistant");
      break;
    case ChatTemplateKind::jinja: break;  // rendered above
  }
  return out.take();
}

std::string segments_text(const std::vector<ChatSegment>& segments) {
  std::string text;
  for (const ChatSegment& s : segments) text += s.text;
  return text;
}

// ---- ChatEncoder ----------------------------------------------------------------------------

ChatEncoder::ChatEncoder(const Tokenizer& tok, const ChatTemplate& tmpl) : tok_(tok), tmpl_(tmpl) {
  std::vector<std::string> required, stops;
  switch (tmpl_.kind) {
    case ChatTemplateKind::shardft:
      required = {tmpl_.bos, "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"};
      stops = {"<|end|>"};
      break;
    case ChatTemplateKind::chatml:
      required = {"<|im_start|>", "<|im_end|>"};
      stops = {"<|im_end|>", tmpl_.eos};
      break;
    case ChatTemplateKind::llama3:
      required = {tmpl_.bos, "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"};
      stops = {"<|eot_id|>", tmpl_.eos};
      break;
    case ChatTemplateKind::plain:
      required = {tmpl_.eos};
      if (!tmpl_.bos.empty()) required.push_back(tmpl_.bos);
      stops = {tmpl_.eos};
      break;
    case ChatTemplateKind::jinja:
      if (!tmpl_.jinja_template) throw std::logic_error("a jinja ChatTemplate without its template");
      break;
  }
  for (const std::string& token : required) ids_[token] = id_of(token);
  // Beginning/end of text only serve plain-text samples in the chat templates: looked up when present,
  // an error only when a sample needs them.
  for (const std::string& token : {tmpl_.bos, tmpl_.eos}) {
    if (token.empty() || ids_.count(token)) continue;
    const std::int32_t id = tok_.special_token_id(token);
    if (id >= 0) ids_[token] = id;
  }
  if (tmpl_.kind == ChatTemplateKind::jinja) find_jinja_stops();
  for (const std::string& token : stops) {
    auto it = ids_.find(token);
    if (it == ids_.end() || std::count(stop_ids_.begin(), stop_ids_.end(), it->second)) continue;
    stop_ids_.push_back(it->second);
    stop_names_.push_back(token);
  }
  const std::int32_t pad = tok_.special_token_id("<|pad|>");
  auto eos = ids_.find(tmpl_.eos);
  pad_id_ = pad >= 0 ? pad : eos != ids_.end() ? eos->second : !stop_ids_.empty() ? stop_ids_.front() : 0;
}

std::int32_t ChatEncoder::id_of(const std::string& content) const {
  auto it = ids_.find(content);
  if (it != ids_.end()) return it->second;
  const std::int32_t id = tok_.special_token_id(content);
  if (id < 0) {
    throw DataError("chat_template " + chat_template_label(tmpl_) + " needs the token " + content +
                    ", which the tokenizer " + tok_.fingerprint() + " does not have");
  }
  return id;
}

TokenizedSample ChatEncoder::encode(const Conversation& conv, int max_seq_length, LossOn on) const {
  if (max_seq_length <= 0) {
    throw std::invalid_argument("chat template: max_seq_length must be positive, got " + std::to_string(max_seq_length));
  }
  if (on == LossOn::assistant || is_text_sample(conv)) return encode_segments(render_chat(tmpl_, conv, false), max_seq_length);
  check_roles(conv);
  std::vector<ChatSegment> segments;
  if (tmpl_.kind == ChatTemplateKind::jinja) {
    segments.push_back({render_jinja_text(tmpl_, conv, false), false, true});
  } else {
    segments = render_chat(tmpl_, conv, false);
  }
  for (ChatSegment& s : segments) s.takes_loss = true;
  return encode_segments(segments, max_seq_length);
}

TokenizedSample ChatEncoder::encode_segments(const std::vector<ChatSegment>& segments, int max_seq_length) const {
  if (max_seq_length <= 0) {
    throw std::invalid_argument("chat template: max_seq_length must be positive, got " + std::to_string(max_seq_length));
  }
  const auto limit = static_cast<std::size_t>(max_seq_length);
  const bool overlap_rule = tmpl_.kind == ChatTemplateKind::jinja;
  TokenizedSample out;
  std::string text;                                  // consecutive text segments, joined
  std::vector<std::pair<std::size_t, bool>> parts;   // (start byte in `text`, takes loss), increasing
  std::vector<TokenSpan> spans;
  auto flush = [&] {
    if (text.empty()) return;
    // Only what truncation keeps, plus one id to know that it truncated.
    const std::size_t room = out.input_ids.size() < limit ? limit - out.input_ids.size() : 0;
    const std::vector<std::int32_t> ids = tok_.encode_prefix(text, room + 1, &spans);
    if (spans.size() != ids.size()) throw std::logic_error("tokenizer gave " + std::to_string(spans.size()) +
                                                           " spans for " + std::to_string(ids.size()) + " ids");
    const std::vector<char> hf_mask = overlap_rule ? transformers_mask(parts, text.size(), spans) : std::vector<char>();
    std::size_t part = 0;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      // Spans are in order, so the part holding a token's first byte only moves forward.
      while (part + 1 < parts.size() && parts[part + 1].first <= spans[k].begin) ++part;
      const bool loss = overlap_rule ? hf_mask[k] != 0 : spans[k].begin < text.size() && parts[part].second;
      out.input_ids.push_back(ids[k]);
      out.labels.push_back(loss ? ids[k] : kIgnore);
    }
    text.clear();
    parts.clear();
  };
  for (const ChatSegment& seg : segments) {
    if (seg.special) {
      flush();
      // Later segments would be cut anyway; stop rendering them.
      if (out.input_ids.size() >= limit) {
        out.truncated = true;
        break;
      }
      const std::int32_t id = id_of(seg.text);
      out.input_ids.push_back(id);
      out.labels.push_back(seg.takes_loss ? id : kIgnore);
    } else {
      parts.push_back({text.size(), seg.takes_loss});
      text += seg.text;
    }
  }
  flush();
  if (out.input_ids.size() > limit) {
    out.truncated = true;
    out.input_ids.resize(limit);
    out.labels.resize(limit);
  }
  return out;
}

bool ChatEncoder::can_generate(const Conversation& conv) {
  return !conv.empty() && conv.back().role == "assistant";
}

GenerationPrompt ChatEncoder::generation_prompt(const Conversation& conv) const {
  if (conv.empty()) throw DataError("generation prompt: empty conversation");
  if (!can_generate(conv)) {
    throw DataError("generation prompt: the last turn must be the assistant's reference answer, got role \"" +
                    conv.back().role + "\"");
  }
  const Conversation prefix(conv.begin(), conv.end() - 1);
  GenerationPrompt prompt;
  // No length limit here: evaluation decides how long a prompt may grow.
  prompt.prompt_ids = encode_segments(render_chat(tmpl_, prefix, true), 1 << 30).input_ids;
  prompt.reference = reference_text(conv);
  return prompt;
}

std::string ChatEncoder::reference_text(const Conversation& conv) const {
  if (conv.empty() || conv.back().role != "assistant") return "";
  if (tmpl_.kind == ChatTemplateKind::llama3) return python_strip(conv.back().content);
  if (tmpl_.kind != ChatTemplateKind::jinja) return conv.back().content;
  // What the turn adds to the generation prompt, up to the first stop token; the content itself
  // when the template does not render the turn after its prompt.
  const Conversation prefix(conv.begin(), conv.end() - 1);
  const std::string prompt = segments_text(render_chat(tmpl_, prefix, true));
  const std::string whole = segments_text(render_chat(tmpl_, conv, false));
  if (whole.compare(0, prompt.size(), prompt) != 0) return conv.back().content;
  std::string turn = whole.substr(prompt.size());
  for (const std::string& stop : stop_names_) {
    const std::size_t at = turn.find(stop);
    if (at != std::string::npos) turn.resize(at);
  }
  return turn;
}

std::string ChatEncoder::describe() const {
  std::string stops;
  for (const std::string& name : stop_names_) stops += (stops.empty() ? "" : " ") + name;
  const std::string how = tmpl_.chosen_by.empty() ? "" : " [" + tmpl_.chosen_by + "]";
  const std::string note = stop_note_.empty() ? "" : "; " + stop_note_;
  return "chat template " + chat_template_label(tmpl_) + how + " (stop: " + (stops.empty() ? "none" : stops) + note +
         "; pad id " + std::to_string(pad_id_) + ")";
}

// ---- the byte tokenizer's shortcuts ---------------------------------------------------------

TokenizedSample apply_chat_template(const ByteTokenizer& tok, const Conversation& conv, int max_seq_length) {
  return ChatEncoder(tok, builtin_chat_template(ChatTemplateKind::shardft)).encode(conv, max_seq_length);
}

GenerationPrompt make_generation_prompt(const ByteTokenizer& tok, const Conversation& conv) {
  return ChatEncoder(tok, builtin_chat_template(ChatTemplateKind::shardft)).generation_prompt(conv);
}

}  // namespace shardft
