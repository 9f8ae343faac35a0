#include "config/lora_config.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <stdexcept>

#include "config/train_config.hpp"

namespace shardft {

namespace {
constexpr const char* kNames[kNumLoraModules] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};

int module_index(const std::string& name) {
  for (int m = 0; m < kNumLoraModules; ++m) {
    if (name == kNames[m]) return m;
  }
  std::string valid;
  for (const char* n : kNames) valid += std::string(valid.empty() ? "" : ", ") + n;
  throw std::invalid_argument("has no module '" + name + "' to target; valid: " + valid + ", or all-linear");
}
}  // namespace

const char* lora_module_name(LoraModule m) { return kNames[static_cast<int>(m)]; }

double LoraSpec::scale() const { return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / r; }

std::vector<std::string> LoraSpec::target_names() const {
  std::vector<std::string> out;
  for (int m = 0; m < kNumLoraModules; ++m) {
    if (targets[m]) out.push_back(kNames[m]);
  }
  return out;
}

std::array<bool, kNumLoraModules> parse_lora_targets(const std::string& text) {
  std::array<bool, kNumLoraModules> t{};
  if (text.find_first_not_of(" \t\n") == std::string::npos) {  // PEFT's default for Llama-family models
    t[static_cast<int>(LoraModule::q_proj)] = t[static_cast<int>(LoraModule::v_proj)] = true;
    return t;
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("is not valid YAML (" + e.msg + ")");
  }
  std::vector<std::string> names;
  if (root.IsScalar()) {
    const std::string s = root.Scalar();
    if (s == "all-linear") {
      t.fill(true);
      return t;
    }
    std::size_t start = 0;  // "q_proj,v_proj" from --lora_target_modules=q_proj,v_proj
    while (start <= s.size()) {
      const std::size_t comma = std::min(s.find(',', start), s.size());
      std::string name = s.substr(start, comma - start);
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      names.push_back(name);
      start = comma + 1;
    }
  } else if (root.IsSequence()) {
    for (const auto& n : root) {
      if (!n.IsScalar()) throw std::invalid_argument("must list module names, got a nested value");
      names.push_back(n.Scalar());
    }
  } else {
    throw std::invalid_argument("must be all-linear or a list of module names");
  }
  if (names.empty()) throw std::invalid_argument("lists no modules");
  for (const std::string& n : names) t[module_index(n)] = true;
  return t;
}

std::string canonical_lora_targets_text(const std::string& text) {
  if (text.find_first_not_of(" \t\n") == std::string::npos) return "";
  const auto t = parse_lora_targets(text);
  bool all = true;
  for (bool b : t) all = all && b;
  if (all && text.find("all-linear") != std::string::npos) return "all-linear";
  std::string out;
  for (int m = 0; m < kNumLoraModules; ++m) {
    if (t[m]) out += std::string(out.empty() ? "[" : ", ") + kNames[m];
  }
  return out + "]";
}

LoraSpec lora_spec(const TrainConfig& cfg) {
  LoraSpec s;
  s.enabled = cfg.use_peft || cfg.peft_type == "lora";
  s.r = cfg.lora_r;
  s.alpha = cfg.lora_alpha;
  s.dropout = cfg.lora_dropout;
  s.use_rslora = cfg.use_rslora;
  s.load_in_4bit = s.enabled && cfg.load_in_4bit;
  s.targets = parse_lora_targets(cfg.lora_target_modules);
  return s;
}

}  // namespace shardft
