#pragma once
// Evaluation's section of the recipe (train/training_eval.hpp, train/best_model.hpp read it), built by
// config/recipe_sections.hpp.
#include <string>

#include "config/data_sections.hpp"

namespace shardft {

// metric_for_best_model, greater_is_better and early stopping's keys, resolved.
struct BestModelRule {
  std::string metric = "loss";  // without the eval_ prefix
  bool greater_is_better = false;
  int patience = 0;             // 0: never stop early
  double threshold = 0.0;
};

// The recipe's evaluation keys (under their names), with what is derived from them resolved once.
struct EvalConfig {
  std::string eval_dataset_path;
  int eval_samples = -1;
  double val_set_size = 0;
  std::string eval_strategy = "no";
  int eval_interval_steps = 0;            // eval_steps, else logging_steps
  bool evaluates_during_training = false;
  bool judges_best_model = false;
  bool eval_generate = false;
  int eval_max_new_tokens = 32;
  int per_device_eval_batch_size = 64;
  int max_seq_length = 64;
  DatasetOptions options;                 // how eval_dataset_path is read: as the training data
  LossSwitches loss;
  BestModelRule best_model;
};

}  // namespace shardft
