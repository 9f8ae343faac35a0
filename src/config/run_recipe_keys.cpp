#include "config/run_recipe_keys.hpp"

#include <yaml-cpp/yaml.h>

#include "config/recipe_schema.hpp"
#include "io/safetensors.hpp"

namespace shardft {
namespace {

// The keys a run's recipe knows better than the defaults of a recipe that does not set them.
const char* const kRunKeys[] = {"tokenizer_name_or_path", "chat_template", "max_seq_length", "bf16",
                                "dataset_text_field"};

}  // namespace

void apply_run_recipe(TrainConfig& cfg, const nlohmann::json& meta, const std::string& meta_path, bool skip_tokenizer) {
  if (!meta.contains("config") || !meta["config"].is_string()) return;
  YAML::Node saved;
  try {
    saved = YAML::Load(meta["config"].get<std::string>());
  } catch (const YAML::Exception& e) {
    throw FormatError(meta_path + ": \"config\" is not a readable recipe: " + e.what());
  }
  if (!saved.IsMap()) return;
  for (const char* name : kRunKeys) {
    if (!source_of(cfg, name).empty() || (skip_tokenizer && std::string(name) == "tokenizer_name_or_path")) continue;
    const YAML::Node v = saved[name];
    if (!v || !v.IsScalar()) continue;
    const std::string where = meta_path + " (the run's recipe)";
    set_value_from_text(cfg, *find_recipe_key(name), v.Scalar(), where);
    cfg.sources.emplace_back(name, where);
  }
}

}  // namespace shardft
