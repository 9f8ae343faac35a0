#pragma once
// The "scheduler" block of a DeepSpeed config. WarmupLR, WarmupDecayLR and WarmupCosineLR become
// lr_scheduler_type ds_warmup, ds_warmup_decay and ds_warmup_cosine (train/lr_schedule.hpp has their
// formulas, stepped as DeepSpeed's engine steps them), and their params set recipe keys:
//   warmup_max_lr -> learning_rate        warmup_num_steps -> warmup_steps    total_num_steps -> max_steps
//   warmup_min_lr, warmup_type, warmup_min_ratio, cos_min_ratio -> the recipe keys of the same names
// "auto" keeps the recipe's value, as HF's Trainer fills it (warmup_num_steps: warmup_steps or
// warmup_ratio of the run; total_num_steps: the run's steps; warmup_min_lr: 0 unless the recipe sets
// it). A param the block leaves out takes DeepSpeed's default, as DeepSpeed would (warmup_num_steps
// 1000; WarmupDecayLR's warmup_max_lr 0.001); total_num_steps has none and must be given.
// Other schedulers (OneCycle, LRRangeTest, torch's) and params DeepSpeed's class does not take are
// rejected naming the file and the JSON path.
#include <nlohmann/json.hpp>

#include "config/deepspeed_json.hpp"

namespace shardft {

// Reads `block` (the value of the "scheduler" key) into ds.settings and ds.entries; throws
// ConfigError naming ds.path and the key.
void read_deepspeed_scheduler(const nlohmann::ordered_json& block, DeepSpeedConfig& ds);

}  // namespace shardft
