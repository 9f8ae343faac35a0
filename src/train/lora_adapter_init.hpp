#pragma once
// Starting LoRA from an existing PEFT adapter (recipe key adapter_path, `--adapter PATH`): its A / B
// factors become the trainable parameters' starting values (its LoRA keys become the recipe's in
// config/adapter_lora_keys.hpp).
#include <string>

#include "model/param_layout.hpp"
#include "parallel/zero_engine.hpp"

namespace shardft {

// Reads adapter_path's tensors, checks them against the layout's base weights (shapes, every targeted
// linear covered), and sets every LoRA factor of the engine from them. Collective (load_weights).
void load_adapter_factors(ZeroEngine& engine, const ParamLayout& layout, const std::string& adapter_dir);

}  // namespace shardft
