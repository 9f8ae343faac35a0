#pragma once
// The training run behind `shardft train`: data, the step loop over epochs, trl-style logs,
// output_dir/metrics.jsonl, the final model and the end-of-run evaluation; and `shardft eval`.
#include <ostream>
#include <string>

#include "config/train_config.hpp"
#include "train/evaluate.hpp"

namespace shardft {

struct RunSummary {
  long steps = 0;
  double train_runtime = 0, train_samples_per_second = 0, train_steps_per_second = 0, train_loss = 0;
  bool evaluated = false;
  EvalResult eval;
};

// How many optimizer steps a run takes over n training samples (HF semantics: an epoch is the
// whole steps that fit; max_steps > 0 wins over num_train_epochs).
struct StepPlan {
  long samples_per_step = 0, steps_per_epoch = 0, total_steps = 0;
};
StepPlan plan_steps(const TrainConfig& cfg, long num_samples);

RunSummary run_training(const TrainConfig& cfg, std::ostream& log);

// Loads output_dir/model.safetensors and evaluates it on eval_dataset_path.
EvalResult run_evaluation(const TrainConfig& cfg, std::ostream& log);

}  // namespace shardft
