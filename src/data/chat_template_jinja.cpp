// The jinja chat-template kind (chat_template.hpp): the model's own template from tokenizer_config.json
// or a .jinja file, its assistant spans (generation blocks, or trl-style prefix renders), its stop tokens,
// and the choice between it and the built-in templates (chat_template: auto).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/chat_template.hpp"
#include "jinja/template.hpp"
#include "data/sft_data.hpp"

namespace shardft {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A probe answer for finding the end-of-turn token: no template changes it, no tokenizer merges it with
// what follows (it ends in a letter run that no added token starts with).
constexpr char kProbeAnswer[] = "shardft probe answer";

jinja::Dict chat_variables(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt) {
  jinja::List messages;
  for (const Turn& turn : conv) {
    jinja::Dict m;
    m.set("role", jinja::Value::string(turn.role));
    m.set("content", jinja::Value::string(turn.content));
    messages.push_back(jinja::Value::of_dict(std::move(m)));
  }
  jinja::Dict vars;
  vars.set("messages", jinja::Value::of_list(std::move(messages)));
  vars.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
  // transformers passes the special tokens the tokenizer has, and tools / documents as None.
  if (!tmpl.bos.empty()) vars.set("bos_token", jinja::Value::string(tmpl.bos));
  if (!tmpl.eos.empty()) vars.set("eos_token", jinja::Value::string(tmpl.eos));
  vars.set("tools", jinja::Value::none());
  vars.set("documents", jinja::Value::none());
  return vars;
}

jinja::Template::Output render_turns(const ChatTemplate& tmpl, const Conversation& conv, std::size_t turns,
                                     bool add_generation_prompt) {
  const Conversation part(conv.begin(), conv.begin() + static_cast<std::ptrdiff_t>(turns));
  return tmpl.jinja_template->render(chat_variables(tmpl, part, add_generation_prompt));
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// trl's assistant spans for a template without generation blocks: what each assistant turn's render
// adds to the render of the turns before it with the generation prompt.
std::vector<std::pair<std::size_t, std::size_t>> prefix_spans(const ChatTemplate& tmpl, const Conversation& conv,
                                                              const std::string& full) {
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (std::size_t i = 0; i < conv.size(); ++i) {
    if (conv[i].role != "assistant") continue;
    const std::string before = render_turns(tmpl, conv, i, true).text;
    const std::string upto = render_turns(tmpl, conv, i + 1, false).text;
    if (!starts_with(upto, before) || !starts_with(full, upto)) {
      throw DataError(tmpl.jinja_template->origin() + ": cannot find the assistant text of turn " +
                      std::to_string(i + 1) + ": the template renders the turns before it" +
                      (starts_with(upto, before) ? "" : " with the generation prompt") +
                      " differently from how they begin once the turn" +
                      (starts_with(upto, before) ? " is followed by later turns" : " is added") +
                      " (it rewrites earlier turns); give the template {% generation %} blocks around the assistant "
                      "content to train on it");
    }
    spans.emplace_back(before.size(), upto.size());
  }
  return spans;
}

std::string fnv1a_hex(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot read the file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// bos_token / eos_token of a tokenizer_config.json: a string, an AddedToken dict {"content": ...}, or
// null / absent ("").
std::string special_token(const json& config, const char* key, const std::string& path) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw DataError(path + ": " + key + " must be a string or an object with a \"content\" string");
}

struct ConfigTemplate {
  bool has_template = false;
  std::string source, bos, eos;
};

// The chat_template of a tokenizer_config.json: a string, or HF's list of {"name", "template"} (the one
// named "default").
ConfigTemplate read_tokenizer_config(const fs::path& path) {
  json config;
  try {
    config = json::parse(read_text_file(path));
  } catch (const json::exception& e) {
    throw DataError(path.string() + ": not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw DataError(path.string() + ": expected a JSON object");
  ConfigTemplate out;
  out.bos = special_token(config, "bos_token", path.string());
  out.eos = special_token(config, "eos_token", path.string());
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return out;
  const json& t = config["chat_template"];
  const std::string where = path.string() + ": chat_template";
  if (t.is_string()) {
    out.source = t.get<std::string>();
  } else if (t.is_array()) {
    std::string names;
    for (const json& entry : t) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() || !entry.contains("template") ||
          !entry["template"].is_string()) {
        throw DataError(where + ": each entry of the list must be {\"name\": string, \"template\": string}");
      }
      if (entry["name"] == "default") out.source = entry["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
    }
    if (out.source.empty()) throw DataError(where + ": the list has no template named \"default\" (it has " + names + ")");
  } else {
    throw DataError(where + ": expected a string or a list of {\"name\", \"template\"}");
  }
  out.has_template = true;
  return out;
}

fs::path tokenizer_config_path(const std::string& tokenizer_name_or_path) {
  return fs::path(tokenizer_config_file(tokenizer_name_or_path));
}

}  // namespace

std::string tokenizer_config_file(const std::string& tokenizer_name_or_path) {
  if (tokenizer_name_or_path.empty() || tokenizer_name_or_path == "byte") return {};
  std::error_code ec;
  const fs::path p(tokenizer_name_or_path);
  const fs::path dir = fs::is_directory(p, ec) ? p : p.parent_path();
  const fs::path config = dir / "tokenizer_config.json";
  return fs::is_regular_file(config, ec) ? config.string() : std::string();
}

std::string render_jinja_text(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt) {
  return render_turns(tmpl, conv, conv.size(), add_generation_prompt).text;
}

ChatTemplate jinja_chat_template(const std::string& source, const std::string& origin, std::string bos, std::string eos) {
  ChatTemplate t;
  t.kind = ChatTemplateKind::jinja;
  t.bos = std::move(bos);
  t.eos = std::move(eos);
  t.jinja_template = std::make_shared<const jinja::Template>(source, origin);
  return t;
}

ChatTemplate resolve_chat_template(const std::string& setting, const std::string& tokenizer_name_or_path,
                                   const Tokenizer& tok) {
  const fs::path config_path = tokenizer_config_path(tokenizer_name_or_path);
  if (setting == "auto") {
    if (!config_path.empty()) {
      const ConfigTemplate c = read_tokenizer_config(config_path);
      if (c.has_template) {
        ChatTemplate t = jinja_chat_template(c.source, config_path.string() + ": chat_template", c.bos, c.eos);
        t.chosen_by = "auto: the chat_template of " + config_path.string();
        return t;
      }
    }
    // The built-in default, logged as before unless a tokenizer_config.json was there without a template.
    ChatTemplate t = chat_template_for(ChatTemplateKind::shardft, tok);
    if (!config_path.empty()) t.chosen_by = "auto: " + config_path.string() + " has no chat_template, the built-in default";
    return t;
  }
  for (const char* builtin : {"shardft", "chatml", "llama3", "plain"}) {
    if (setting == builtin) return chat_template_for(parse_chat_template_kind(setting), tok);
  }
  std::error_code ec;
  if (!setting.empty() && fs::is_regular_file(setting, ec)) {
    if (fs::path(setting).extension() == ".json") {
      const ConfigTemplate c = read_tokenizer_config(setting);
      if (!c.has_template) throw DataError(setting + ": no chat_template in this tokenizer config");
      ChatTemplate t = jinja_chat_template(c.source, setting + ": chat_template", c.bos, c.eos);
      t.chosen_by = "the chat_template of " + setting;
      return t;
    }
    // A bare template file: the special tokens come from the tokenizer's own config, when there is one.
    ConfigTemplate tokens;
    if (!config_path.empty()) tokens = read_tokenizer_config(config_path);
    ChatTemplate t = jinja_chat_template(read_text_file(setting), setting, tokens.bos, tokens.eos);
    t.chosen_by = "file " + setting + (config_path.empty() ? "" : ", bos/eos from " + config_path.string());
    return t;
  }
  const std::string ext = fs::path(setting).extension().string();
  if (ext == ".jinja" || ext == ".json") throw DataError("chat_template " + setting + ": no such file");
  throw DataError("unknown chat_template '" + setting +
                  "' (expected auto, shardft, chatml, llama3, plain, or the path of a .jinja file or a "
                  "tokenizer_config.json)");
}

std::string chat_template_label(const ChatTemplate& tmpl) {
  if (tmpl.kind != ChatTemplateKind::jinja || !tmpl.jinja_template) return chat_template_name(tmpl.kind);
  return "jinja " + tmpl.jinja_template->origin() + " " + fnv1a_hex(tmpl.jinja_template->source());
}

std::vector<ChatSegment> render_jinja_chat(const ChatTemplate& tmpl, const Conversation& conv, bool add_generation_prompt) {
  std::vector<ChatSegment> out;
  if (is_text_sample(conv)) {
    if (!tmpl.bos.empty()) out.push_back({tmpl.bos, true, false});
    out.push_back({conv[0].content, false, true});
    if (tmpl.eos.empty()) {
      throw DataError(tmpl.jinja_template->origin() + ": plain-text samples end with the eos_token, which is not set");
    }
    out.push_back({tmpl.eos, true, true});
    return out;
  }
  jinja::Template::Output full = tmpl.jinja_template->render(chat_variables(tmpl, conv, add_generation_prompt));
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  if (tmpl.jinja_template->has_generation_blocks()) {
    spans = std::move(full.generation_spans);
  } else if (!add_generation_prompt) {  // generation prompts take no loss: no need to find it
    spans = prefix_spans(tmpl, conv, full.text);
  }
  std::size_t pos = 0;
  for (const auto& span : spans) {
    if (span.first < pos || span.second < span.first) continue;  // nested or empty: already covered
    if (span.first > pos) out.push_back({full.text.substr(pos, span.first - pos), false, false});
    if (span.second > span.first) out.push_back({full.text.substr(span.first, span.second - span.first), false, true});
    pos = span.second;
  }
  if (pos < full.text.size()) out.push_back({full.text.substr(pos), false, false});
  return out;
}

void ChatEncoder::find_jinja_stops() {
  // Render a probe answer and take the token right after it when it is a special or added token.
  std::string after;
  for (const Conversation& probe : {Conversation{{"user", "Hi"}, {"assistant", kProbeAnswer}},
                                    Conversation{{"system", "S"}, {"user", "Hi"}, {"assistant", kProbeAnswer}}}) {
    try {
      const std::string text = segments_text(render_chat(tmpl_, probe, false));
      const std::size_t at = text.rfind(kProbeAnswer);
      if (at == std::string::npos) {
        stop_note_ = "no end-of-turn token: the template does not render the assistant's content as it is";
        break;
      }
      after = text.substr(at + sizeof(kProbeAnswer) - 1);
      stop_note_.clear();
      break;
    } catch (const DataError& e) {
      stop_note_ = std::string("no end-of-turn token: rendering a probe conversation failed: ") + e.what();
    }
  }
  auto add_stop = [&](const std::string& content, std::int32_t id) {
    if (std::count(stop_ids_.begin(), stop_ids_.end(), id)) return;
    stop_ids_.push_back(id);
    stop_names_.push_back(content);
  };
  if (!after.empty()) {
    const std::vector<std::int32_t> ids = tok_.encode(after);
    const std::string first = ids.empty() ? "" : tok_.decode({ids[0]});
    if (!ids.empty() && tok_.special_token_id(first) == ids[0]) {
      add_stop(first, ids[0]);
    } else if (stop_note_.empty()) {
      stop_note_ = "no end-of-turn token: the text after an assistant turn does not start with a special token";
    }
  } else if (stop_note_.empty()) {
    stop_note_ = "no end-of-turn token: nothing follows an assistant turn";
  }
  if (!tmpl_.eos.empty() && tok_.special_token_id(tmpl_.eos) >= 0) add_stop(tmpl_.eos, tok_.special_token_id(tmpl_.eos));
}

}  // namespace shardft
