#pragma once
// The checkpoints' section of the recipe (train/checkpoint.hpp, train/checkpointer.hpp read it; built by
// config/recipe_sections.hpp): where they go, when they are due, and what of the recipe each one carries.
#include <cstdint>
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

// The final model's export (infer/model_export.hpp): an HF model directory in output_dir.
struct ModelExportConfig {
  std::string output_dir;
  std::string model_name_or_path;   // its config.json is the export's; its torch_dtype decides auto
  std::string export_dtype = "auto";  // auto | fp32 | bf16 | fp16
  std::uint64_t max_shard_bytes = 5000000000ull;  // HF's default "5GB"
};

}  // namespace shardft
