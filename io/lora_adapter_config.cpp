#include "io/lora_adapter_config.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace shardft {

const std::vector<std::string>& lora_linear_modules() {
  static const std::vector<std::string> modules = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"};
  return modules;
}

namespace {

std::string valid_names() {
  std::string s = "\"all-linear\" or names among";
  for (const auto& m : lora_linear_modules()) s += " " + m;
  return s;
}

}  // namespace

std::vector<std::string> lora_target_modules(const std::vector<std::string>& names, const std::string& where) {
  if (names.empty()) throw FormatError(where + ": no target module given; expected " + valid_names());
  std::vector<bool> chosen(lora_linear_modules().size(), false);
  for (const auto& name : names) {
    const auto& all = lora_linear_modules();
    const auto it = std::find(all.begin(), all.end(), name);
    if (it == all.end()) {
      throw FormatError(where + ": '" + name + "' is not a linear module of a decoder layer; expected " +
                        valid_names() + " (lm_head and embed_tokens cannot carry LoRA here)");
    }
    chosen[static_cast<std::size_t>(it - all.begin())] = true;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    if (chosen[i]) out.push_back(lora_linear_modules()[i]);
  }
  return out;
}

std::vector<std::string> lora_target_modules(const std::string& spec, const std::string& where) {
  if (spec == "all-linear") return lora_linear_modules();
  std::vector<std::string> names;
  std::stringstream in(spec);
  for (std::string item; std::getline(in, item, ',');) {
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    names.push_back(b == std::string::npos ? std::string() : item.substr(b, e - b + 1));
  }
  for (const auto& n : names) {
    if (n.empty()) throw FormatError(where + ": empty module name in '" + spec + "'; expected " + valid_names());
  }
  return lora_target_modules(names, where);
}

double LoraAdapterConfig::scale() const {
  return use_rslora ? lora_alpha / std::sqrt(static_cast<double>(r)) : lora_alpha / r;
}

bool LoraAdapterConfig::targets(const std::string& module) const {
  return std::find(target_modules.begin(), target_modules.end(), module) != target_modules.end();
}

std::string adapter_config_to_json(const LoraAdapterConfig& c) {
  using nlohmann::json;
  json j = json::object();
  j["alpha_pattern"] = json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] =
      c.base_model_name_or_path.empty() ? json(nullptr) : json(c.base_model_name_or_path);
  j["bias"] = c.bias;
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;  // PEFT sets it while saving
  j["init_lora_weights"] = true;
  j["layer_replication"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["loftq_config"] = json::object();
  // An integral alpha is written as an integer, as PEFT does for LoraConfig(lora_alpha=16).
  if (c.lora_alpha == std::floor(c.lora_alpha) && std::abs(c.lora_alpha) < 1e15) {
    j["lora_alpha"] = static_cast<long long>(c.lora_alpha);
  } else {
    j["lora_alpha"] = c.lora_alpha;
  }
  j["lora_dropout"] = c.lora_dropout;
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  j["modules_to_save"] = nullptr;
  j["peft_type"] = c.peft_type;
  j["r"] = c.r;
  j["rank_pattern"] = json::object();
  j["revision"] = nullptr;
  j["target_modules"] = c.target_modules;
  j["task_type"] = c.task_type;
  j["use_dora"] = false;
  j["use_rslora"] = c.use_rslora;
  return j.dump(2) + "\n";  // nlohmann objects iterate in key order: sorted, as PEFT's sort_keys=True
}

namespace {

using nlohmann::json;

bool is_unset(const json& v) {  // null, false, an empty list or an empty object
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_array() && v.empty()) ||
         (v.is_object() && v.empty());
}

// Keys that change what the adapter computes in ways shardft does not implement: accepted only unset.
struct UnsupportedKey {
  const char* key;
  const char* supported;
};
const UnsupportedKey kUnsupported[] = {
    {"use_dora", "plain LoRA only (use_dora false)"},
    {"lora_bias", "no LoRA bias (lora_bias false)"},
    {"fan_in_fan_out", "weights stored [out, in] (fan_in_fan_out false)"},
    {"modules_to_save", "no fully trained extra modules (modules_to_save null)"},
    {"layers_to_transform", "LoRA on every layer (layers_to_transform null)"},
    {"layer_replication", "no layer replication (layer_replication null)"},
    {"rank_pattern", "one rank r for every module (rank_pattern {})"},
    {"alpha_pattern", "one lora_alpha for every module (alpha_pattern {})"},
    {"exclude_modules", "no excluded modules (exclude_modules null)"},
    {"target_parameters", "LoRA on linear modules only (target_parameters null)"},
    {"trainable_token_indices", "no trainable token rows (trainable_token_indices null)"},
    {"use_qalora", "plain LoRA only (use_qalora false)"},
    {"alora_invocation_tokens", "plain LoRA only (alora_invocation_tokens null)"},
};

[[noreturn]] void bad_key(const std::string& where, const std::string& key, const json& got,
                          const std::string& supported) {
  throw FormatError(where + ": key '" + key + "' is " + got.dump() + "; shardft supports " + supported);
}

}  // namespace

LoraAdapterConfig adapter_config_from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw FormatError(where + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw FormatError(where + ": expected a JSON object");

  LoraAdapterConfig c;
  if (!j.contains("peft_type")) throw FormatError(where + ": missing key 'peft_type' (expected \"LORA\")");
  if (j["peft_type"] != "LORA") bad_key(where, "peft_type", j["peft_type"], "LoRA adapters only (\"LORA\")");
  if (j.contains("task_type") && !j["task_type"].is_null() && j["task_type"] != "CAUSAL_LM") {
    bad_key(where, "task_type", j["task_type"], "causal language models only (\"CAUSAL_LM\" or null)");
  }
  if (j.contains("bias") && j["bias"] != "none") bad_key(where, "bias", j["bias"], "bias \"none\" only");
  for (const auto& u : kUnsupported) {
    if (j.contains(u.key) && !is_unset(j[u.key])) bad_key(where, u.key, j[u.key], u.supported);
  }

  if (!j.contains("r")) throw FormatError(where + ": missing key 'r' (the LoRA rank, a positive integer)");
  const json& r = j["r"];
  if (!r.is_number_integer() || r.get<long long>() <= 0 || r.get<long long>() > (1 << 30)) {
    bad_key(where, "r", r, "a positive integer rank");
  }
  c.r = r.get<int>();
  if (j.contains("lora_alpha")) {  // PEFT's default is 8
    if (!j["lora_alpha"].is_number() || !std::isfinite(j["lora_alpha"].get<double>()) || j["lora_alpha"].get<double>() == 0) {
      bad_key(where, "lora_alpha", j["lora_alpha"], "a finite, non-zero number");
    }
    c.lora_alpha = j["lora_alpha"].get<double>();
  }
  if (j.contains("lora_dropout") && !j["lora_dropout"].is_null()) {
    const json& d = j["lora_dropout"];
    if (!d.is_number() || d.get<double>() < 0 || d.get<double>() >= 1) {
      bad_key(where, "lora_dropout", d, "a probability in [0, 1)");
    }
    c.lora_dropout = d.get<double>();
  }
  if (j.contains("use_rslora") && !j["use_rslora"].is_null()) {
    if (!j["use_rslora"].is_boolean()) bad_key(where, "use_rslora", j["use_rslora"], "true or false");
    c.use_rslora = j["use_rslora"].get<bool>();
  }

  const std::string tm_where = where + ": key 'target_modules'";
  const json& tm = j.contains("target_modules") ? j["target_modules"] : json(nullptr);
  if (tm.is_string()) {
    if (tm != "all-linear") {
      bad_key(where, "target_modules", tm,
              "a list of module names or \"all-linear\" (PEFT's regular-expression string form is not supported)");
    }
    c.target_modules = lora_linear_modules();
  } else if (tm.is_array()) {
    std::vector<std::string> names;
    for (const auto& v : tm) {
      if (!v.is_string()) bad_key(where, "target_modules", tm, "a list of module names (strings)");
      names.push_back(v.get<std::string>());
    }
    c.target_modules = lora_target_modules(names, tm_where);
  } else {
    bad_key(where, "target_modules", tm, "a list of module names or \"all-linear\"");
  }

  if (j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string()) {
    c.base_model_name_or_path = j["base_model_name_or_path"].get<std::string>();
  }
  return c;
}

void write_adapter_config_json(const std::string& path, const LoraAdapterConfig& config) {
  const std::string text = adapter_config_to_json(config);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw FormatError("cannot write '" + tmp + "': " + std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw FormatError("write to '" + tmp + "' failed: " + std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw FormatError("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(errno));
  }
}

LoraAdapterConfig read_adapter_config_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError("cannot open '" + path + "': " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return adapter_config_from_json(text.str(), path);
}

}  // namespace shardft
