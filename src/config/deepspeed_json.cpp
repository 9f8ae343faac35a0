#include "config/deepspeed_json.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/train_config.hpp"

namespace shardft {

const std::vector<std::pair<std::string, std::string>>& deepspeed_key_map() {
  static const std::vector<std::pair<std::string, std::string>> map = {
      {"train_micro_batch_size_per_gpu", "per_device_train_batch_size"},
      {"gradient_accumulation_steps", "gradient_accumulation_steps"},
      {"train_batch_size", "train_batch_size"},
      {"gradient_clipping", "max_grad_norm"},
      {"steps_per_print", "logging_steps"},
      {"bf16.enabled", "bf16"},
      {"communication_data_type", "communication_data_type"},
      {"zero_optimization.stage", "zero_stage"},
      {"zero_optimization.zero_hpz_partition_size", "zero_hpz_partition_size"},
      {"zero_optimization.zero_quantized_weights", "zero_quantized_weights"},
      {"zero_optimization.zero_quantized_gradients", "zero_quantized_gradients"},
  };
  return map;
}

namespace {

std::string recipe_key_for(const std::string& ds_key) {
  for (const auto& [ds, recipe] : deepspeed_key_map()) {
    if (ds == ds_key) return recipe;
  }
  return "";
}

// Settings that change nothing in shardft may stay: the switch of a feature in its off position.
bool harmless(const std::string& key, const nlohmann::json& v) {
  const bool off = v.is_boolean() && !v.get<bool>();
  return (key == "fp16.enabled" && off) || (key == "wall_clock_breakdown" && off) ||
         (key == "zero_allow_untested_optimizer");
}

void walk(const nlohmann::json& node, const std::string& prefix, const std::string& path, std::vector<KeySetting>& out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    const nlohmann::json& v = it.value();
    const std::string recipe = recipe_key_for(key);
    if (recipe.empty() && v.is_object() && (key == "zero_optimization" || key == "bf16" || key == "fp16")) {
      walk(v, key, path, out);
      continue;
    }
    if (recipe.empty()) {
      if (harmless(key, v)) continue;
      std::string known;
      for (const auto& [ds, r] : deepspeed_key_map()) known += (known.empty() ? "" : ", ") + ds;
      throw ConfigError(path + ": DeepSpeed key '" + key + "' is not supported by shardft (it reads: " + known + ")");
    }
    if (v.is_string() && v.get<std::string>() == "auto") continue;  // the recipe decides
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_boolean() || v.is_number()) {
      text = v.dump();
    } else {
      throw ConfigError(path + ": DeepSpeed key '" + key + "' expects a number, a boolean or \"auto\", got " + v.dump());
    }
    out.push_back({recipe, text, path + ": " + key});
  }
}

}  // namespace

std::vector<KeySetting> read_deepspeed_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot open DeepSpeed config '" + path + "': " + std::strerror(errno));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(path + ": a DeepSpeed config is a JSON object");
  std::vector<KeySetting> out;
  walk(j, "", path, out);
  return out;
}

}  // namespace shardft
