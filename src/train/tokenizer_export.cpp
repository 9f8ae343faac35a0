#include "train/tokenizer_export.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "data/chat_template_source.hpp"
#include "infer/hf_export.hpp"

namespace fs = std::filesystem;

namespace shardft {

namespace {

// A JSON object from `path`, or an empty object where there is no such file. The tokenizer's config was
// parsed when the run resolved its template; a generation_config.json is read here first.
nlohmann::json read_json_object(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !fs::is_regular_file(path, ec)) return nlohmann::json::object();
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object()) throw DataError(path + ": not valid JSON, or not a JSON object");
  return j;
}

void write_json(const nlohmann::json& j, const std::string& path) {
  std::ofstream out(path, std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out.flush()) throw std::runtime_error("cannot write '" + path + "'");
}

// The chat_template entry for `source`: kept as it is where the config already holds this template (a
// string, or HF's list of named templates whose default it is).
bool holds_template(const nlohmann::json& config, const std::string& source) {
  if (!config.contains("chat_template")) return false;
  const nlohmann::json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>() == source;
  if (!t.is_array()) return false;
  return std::any_of(t.begin(), t.end(), [&](const nlohmann::json& e) {
    return e.is_object() && e.value("name", "") == "default" && e.value("template", "") == source;
  });
}

std::string token_content(const Tokenizer& tok, std::int32_t id) { return tok.decode({id}, false); }

}  // namespace

TokenizerExport tokenizer_export(const TokenizerSources& cfg, const ChatEncoder& encoder) {
  TokenizerExport e;
  e.tokenizer_name_or_path = cfg.tokenizer_name_or_path;
  const ChatTemplate& tmpl = encoder.chat_template();
  const Tokenizer& tok = encoder.tokenizer();
  if (cfg.tokenizer_name_or_path != "byte" && !cfg.tokenizer_name_or_path.empty()) {
    nlohmann::json c = read_json_object(tokenizer_config_file(cfg.tokenizer_name_or_path));
    if (c.empty()) c = {{"tokenizer_class", "PreTrainedTokenizerFast"}, {"clean_up_tokenization_spaces", false}};
    const std::string source = chat_template_jinja_source(tmpl);
    if (!holds_template(c, source)) c["chat_template"] = source;
    // A template renders bos_token / eos_token where it uses them: the run's, where the config has none.
    if (!tmpl.bos.empty() && !c.contains("bos_token")) c["bos_token"] = tmpl.bos;
    if (!tmpl.eos.empty() && !c.contains("eos_token")) c["eos_token"] = tmpl.eos;
    if (!c.contains("pad_token")) c["pad_token"] = token_content(tok, encoder.pad_id());
    if (!c.contains("model_max_length")) c["model_max_length"] = cfg.model_max_length;
    e.tokenizer_config = c;
  }
  nlohmann::json g = cfg.model_name_or_path.empty()
                         ? nlohmann::json::object()
                         : read_json_object((fs::path(cfg.model_name_or_path) / "generation_config.json").string());
  // Generation stops at the template's end of turn and end of text, and at what the model's own config named.
  std::vector<std::int32_t> eos(encoder.stop_ids());
  const nlohmann::json before = g.value("eos_token_id", nlohmann::json());
  for (const nlohmann::json& id : before.is_array() ? before : nlohmann::json::array({before})) {
    if (id.is_number_integer() && std::find(eos.begin(), eos.end(), id.get<std::int32_t>()) == eos.end()) {
      eos.push_back(id.get<std::int32_t>());
    }
  }
  if (eos.size() == 1) g["eos_token_id"] = eos[0];
  if (eos.size() > 1) g["eos_token_id"] = eos;
  const std::int32_t bos = tmpl.bos.empty() ? -1 : tok.special_token_id(tmpl.bos);
  if (bos >= 0 && !g.contains("bos_token_id")) g["bos_token_id"] = bos;
  if (!g.contains("pad_token_id")) g["pad_token_id"] = encoder.pad_id();
  e.generation_config = g;
  return e;
}

void write_tokenizer_export(const TokenizerExport& e, const std::string& dir) {
  copy_tokenizer_files(e.tokenizer_name_or_path, dir);
  if (!e.tokenizer_config.is_null()) write_json(e.tokenizer_config, (fs::path(dir) / "tokenizer_config.json").string());
  write_json(e.generation_config, (fs::path(dir) / "generation_config.json").string());
}

}  // namespace shardft
