#include "config/adapter_lora_keys.hpp"

#include <array>
#include <sstream>
#include <string>

#include "config/lora_config.hpp"
#include "io/lora_adapter_config.hpp"
#include "io/peft_adapter.hpp"

namespace shardft {
namespace {

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The adapter's value, unless the recipe set the key to another: a ConfigError naming both.
template <class T>
T agreed(const TrainConfig& cfg, const std::string& key, const T& recipe, const T& adapter,
         const std::string& recipe_text, const std::string& adapter_text, const std::string& file) {
  const std::string where = source_of(cfg, key);
  if (where.empty() || recipe == adapter) return adapter;
  throw ConfigError(where + ": " + key + " is " + recipe_text + " but the adapter " + file + " has " + adapter_text +
                    "; remove the key to take the adapter's, or use an adapter trained with it");
}

std::string targets_text(const std::array<bool, kNumLoraModules>& t) {
  std::string out;
  for (int m = 0; m < kNumLoraModules; ++m) {
    if (t[m]) out += std::string(out.empty() ? "[" : ", ") + lora_module_name(static_cast<LoraModule>(m));
  }
  return out + "]";
}

}  // namespace

TrainConfig with_adapter_lora_keys(const TrainConfig& cfg) {
  if (cfg.adapter_path.empty()) return cfg;
  const std::string file = cfg.adapter_path + "/" + kAdapterConfigFile;
  const LoraAdapterConfig a = read_adapter_config_json(file);
  TrainConfig out = cfg;
  out.use_peft = true;
  out.lora_r = agreed(cfg, "lora_r", cfg.lora_r, a.r, std::to_string(cfg.lora_r), std::to_string(a.r), file);
  out.lora_alpha = agreed(cfg, "lora_alpha", cfg.lora_alpha, a.lora_alpha, number_text(cfg.lora_alpha),
                          number_text(a.lora_alpha), file);
  // Dropout shapes training, not the adapter's function: a recipe that sets it overrides the adapter's.
  if (source_of(cfg, "lora_dropout").empty()) out.lora_dropout = a.lora_dropout;
  out.use_rslora = agreed(cfg, "use_rslora", cfg.use_rslora, a.use_rslora, cfg.use_rslora ? "true" : "false",
                          a.use_rslora ? "true" : "false", file);
  std::array<bool, kNumLoraModules> adapter_targets{};
  for (int m = 0; m < kNumLoraModules; ++m) adapter_targets[m] = a.targets(lora_module_name(static_cast<LoraModule>(m)));
  const std::string targets_at = source_of(cfg, "lora_target_modules");
  const auto recipe_targets = parse_lora_targets(cfg.lora_target_modules);
  if (!targets_at.empty() && recipe_targets != adapter_targets) {
    throw ConfigError(targets_at + ": lora_target_modules is " + targets_text(recipe_targets) + " but the adapter " +
                      file + " targets " + targets_text(adapter_targets) +
                      "; remove the key to take the adapter's, or use an adapter trained with it");
  }
  out.lora_target_modules = targets_text(adapter_targets);
  return out;
}

}  // namespace shardft
