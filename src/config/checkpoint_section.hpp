#pragma once
// The checkpoints' section of the recipe (train/checkpoint.hpp, train/checkpointer.hpp read it; built by
// config/recipe_sections.hpp): where they go, when they are due, and what of the recipe each one carries.
#include <string>

#include "config/compute_dtype.hpp"
#include "config/model_config.hpp"

namespace shardft {

// When a checkpoint is due (train/checkpoint.hpp checkpoint_due).
struct SaveSchedule {
  std::string save_strategy = "steps";  // HF's keys, as the recipe holds them
  int save_steps = 0;
};

struct CheckpointConfig {
  std::string output_dir;
  SaveSchedule schedule;
  int save_total_limit = 0;             // > 0: older checkpoints are removed beyond it
  std::string model_name_or_path;       // its config.json travels as hf_config; a LoRA adapter names it
  std::string tokenizer_name_or_path;   // copied in where the run gives no tokenizer export
  int zero_stage = 0;
  ModelConfig model;
  ComputeDtype dtype = ComputeDtype::fp32;  // a QLoRA base is quantized for it at a merge
  std::string recipe_yaml;              // the whole recipe (config/train_config.hpp to_yaml)
};

}  // namespace shardft
