#pragma once
// A DeepSpeed config (`--deepspeed ds_config.json`) read as recipe settings. Each key a DeepSpeed user
// has is one of three things:
//   honored    it sets a recipe key (zero_optimization.stage -> zero_stage, optimizer.params.lr ->
//              learning_rate, ...); "auto" keeps the recipe's value, as HF's Trainer fills "auto" from
//              its TrainingArguments;
//   no effect  it tunes DeepSpeed's own implementation and shardft already does what it is for
//              (contiguous_gradients: gradients always live in flat buffers); accepted, and the startup
//              report says what shardft does instead;
//   rejected   shardft does not implement it (fp16 loss scaling, CPU/NVMe offload, OneCycle and the other
//              LR schedulers besides WarmupLR / WarmupDecayLR / WarmupCosineLR, unknown keys): a
//              ConfigError that names the file and the JSON path.
// The "scheduler" block is read by config/deepspeed_scheduler.hpp.
// The table of keys is in deepspeed_json.cpp; README's DeepSpeed section lists it for users.
#include <functional>
#include <string>
#include <vector>

#include "config/train_config.hpp"

namespace shardft {

struct KeySetting {
  std::string key;    // recipe key
  std::string value;  // as text, parsed by the recipe schema
  std::string where;  // "ds_config.json: zero_optimization.stage"
};

// One key of the file and what shardft does with it, for the startup report.
struct DeepSpeedEntry {
  std::string ds_key;                    // JSON path: "zero_optimization.stage"
  std::string value;                     // as written: "2", "true", "auto", "[0.9, 0.95]"
  std::vector<std::string> recipe_keys;  // honored: the recipe keys it sets (or, when "auto", keeps)
  std::string note;                      // what shardft does with it, when that needs saying
};

struct DeepSpeedConfig {
  std::string path;
  std::vector<KeySetting> settings;     // applied after the YAML recipe, before --key=value overrides
  std::vector<DeepSpeedEntry> entries;  // every key read, in file order
  // Checks that need the final values (recipe, DeepSpeed and overrides applied); each throws
  // ConfigError naming its DeepSpeed key.
  std::vector<std::function<void(const TrainConfig&)>> final_checks;
};

// Reads and checks the file; throws ConfigError naming the file and key for anything rejected.
DeepSpeedConfig read_deepspeed_config(const std::string& path);
// The same for the file's text already read; `path` names it in messages.
DeepSpeedConfig parse_deepspeed_config(const std::string& text, const std::string& path);

// Runs final_checks against the finished config.
void check_deepspeed_config(const DeepSpeedConfig& ds, const TrainConfig& cfg);

// The startup report: one line per key with its resolved recipe value ("auto" resolved, the global
// batch computed for world_size ranks) or what shardft does instead.
std::string describe_deepspeed_config(const DeepSpeedConfig& ds, const TrainConfig& cfg, int world_size);

}  // namespace shardft
