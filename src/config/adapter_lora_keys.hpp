#pragma once
// Starting LoRA from an existing PEFT adapter (recipe key adapter_path, `--adapter PATH`): the adapter's
// rank, alpha, targets, rsLoRA (and dropout, unless the recipe sets its own) become the recipe's LoRA keys.
// (Its A / B factors become the trainable parameters' starting values in train/lora_adapter_init.hpp.)
#include "config/train_config.hpp"

namespace shardft {

// cfg with adapter_path's adapter_config.json folded in (cfg itself without adapter_path): LoRA is on;
// lora_r, lora_alpha, lora_target_modules and use_rslora take the adapter's values, and one the recipe or
// a flag set (TrainConfig::sources) to another value is a ConfigError naming where it was set, the key,
// both values and the file (they define the adapter's function). lora_dropout is the recipe's if set, else
// the adapter's. A bad adapter folder is a FormatError naming the file.
TrainConfig with_adapter_lora_keys(const TrainConfig& cfg);

}  // namespace shardft
