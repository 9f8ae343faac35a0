#include "train/lora_adapter_init.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "config/lora_config.hpp"
#include "io/peft_adapter.hpp"

namespace shardft {
namespace {

std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Where the recipe or a flag set `key` ("recipe.yaml:12", "--lora_r"); "" when it was left at its default.
std::string set_at(const TrainConfig& cfg, const std::string& key) {
  for (const auto& [k, where] : cfg.sources) {
    if (k == key) return where;
  }
  return "";
}

// The adapter's value, unless the recipe set the key to another: a ConfigError naming both.
template <class T>
T agreed(const TrainConfig& cfg, const std::string& key, const T& recipe, const T& adapter,
         const std::string& recipe_text, const std::string& adapter_text, const std::string& file) {
  const std::string where = set_at(cfg, key);
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
  if (set_at(cfg, "lora_dropout").empty()) out.lora_dropout = a.lora_dropout;
  out.use_rslora = agreed(cfg, "use_rslora", cfg.use_rslora, a.use_rslora, cfg.use_rslora ? "true" : "false",
                          a.use_rslora ? "true" : "false", file);
  std::array<bool, kNumLoraModules> adapter_targets{};
  for (int m = 0; m < kNumLoraModules; ++m) adapter_targets[m] = a.targets(lora_module_name(static_cast<LoraModule>(m)));
  const std::string targets_at = set_at(cfg, "lora_target_modules");
  const auto recipe_targets = parse_lora_targets(cfg.lora_target_modules);
  if (!targets_at.empty() && recipe_targets != adapter_targets) {
    throw ConfigError(targets_at + ": lora_target_modules is " + targets_text(recipe_targets) + " but the adapter " +
                      file + " targets " + targets_text(adapter_targets) +
                      "; remove the key to take the adapter's, or use an adapter trained with it");
  }
  out.lora_target_modules = targets_text(adapter_targets);
  return out;
}

void load_adapter_factors(ZeroEngine& engine, const ParamLayout& layout, const std::string& adapter_dir) {
  const PeftAdapter adapter = read_peft_adapter(adapter_dir);
  std::map<std::string, std::vector<std::int64_t>> base_shapes;
  for (const ParamSpec& p : layout.params()) {
    if (!p.is_lora()) base_shapes[p.name] = p.shape;
  }
  check_peft_adapter_matches(adapter, base_shapes, adapter_dir);
  // A layout factor "<module path>.lora_A.weight" is the adapter's A of "<module path>.weight".
  auto factor_of = [&](const ParamSpec& p) -> const TensorF32& {
    const std::string tail = p.kind == ParamKind::lora_a ? ".lora_A.weight" : ".lora_B.weight";
    const std::string base = p.name.substr(0, p.name.size() - tail.size()) + ".weight";
    const auto it = adapter.tensors.find(base);
    if (it == adapter.tensors.end()) {
      throw FormatError(adapter_dir + ": the adapter has no " + (p.kind == ParamKind::lora_a ? "A" : "B") +
                        " for '" + base + "', which the recipe's LoRA targets");
    }
    const TensorF32& t = p.kind == ParamKind::lora_a ? it->second.A : it->second.B;
    if (t.shape != p.shape) {
      throw FormatError(adapter_dir + ": the factor '" + p.name + "' has another shape than the recipe's lora_r implies");
    }
    return t;
  };
  for (const ParamSpec& p : layout.params()) {
    if (p.is_lora()) factor_of(p);  // every factor present, before any rank loads
  }
  engine.load_weights(
      [&](int param, std::int64_t first, std::int64_t count, float* out) {
        const TensorF32& t = factor_of(layout.params()[param]);
        std::copy_n(t.data.begin() + first, count, out);
      },
      ParamSet::trainable);
}

}  // namespace shardft
