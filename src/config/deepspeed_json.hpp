#pragma once
// A DeepSpeed config (`--deepspeed ds_config.json`) read as recipe settings: the ZeRO and batch keys
// DeepSpeed users already have map onto shardft's recipe keys. "auto" leaves the recipe's value.
// A key shardft does not implement is an error that names it, never silently ignored.
#include <string>
#include <vector>

namespace shardft {

struct KeySetting {
  std::string key;    // recipe key
  std::string value;  // as text, parsed by the recipe schema
  std::string where;  // "ds_config.json: zero_optimization.stage"
};

std::vector<KeySetting> read_deepspeed_config(const std::string& path);

// The DeepSpeed keys understood, with the recipe key each one sets.
const std::vector<std::pair<std::string, std::string>>& deepspeed_key_map();

}  // namespace shardft
