#pragma once
// The training run behind `shardft train`: data, the step loop over epochs, trl-style logs,
// output_dir/metrics.jsonl, the final model and the end-of-run evaluation; and `shardft eval`.
#include <ostream>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "config/train_config.hpp"
#include "train/evaluate.hpp"
#include "train/trainer.hpp"

namespace shardft {

struct RunSummary {
  long steps = 0;
  double train_runtime = 0, train_samples_per_second = 0, train_steps_per_second = 0, train_loss = 0;
  bool evaluated = false;
  bool preempted = false;  // stopped by SIGTERM / SIGUSR1 after saving a checkpoint
  EvalResult eval;
};

// How many optimizer steps a run takes over n training samples (HF semantics: an epoch is the
// whole global batches that fit; max_steps > 0 wins over num_train_epochs).
// Global batch = per_device_train_batch_size x gradient_accumulation_steps x data-parallel ranks.
struct StepPlan {
  long samples_per_step = 0, steps_per_epoch = 0, total_steps = 0;
};
StepPlan plan_steps(const TrainConfig& cfg, long num_samples, int dp_ranks);

// The distributed sampler: the sample indices of micro-batch `micro` of optimizer step `step` on
// data-parallel rank `rank`. Ranks get disjoint slices of each global batch; epochs reshuffle.
std::vector<std::int64_t> micro_batch_indices(const TrainConfig& cfg, const StepPlan& plan,
                                              const std::vector<std::int64_t>& epoch_order, long step, int micro,
                                              int rank, int dp_ranks);

// Every rank calls it; only rank 0 of the world writes logs, metrics.jsonl and the model.
RunSummary run_training(const TrainConfig& cfg, const ParallelPlan& plan, std::ostream& log);
RunSummary run_training(const TrainConfig& cfg, Communicator& world, std::ostream& log);

// Loads output_dir/model.safetensors and evaluates it on eval_dataset_path (every rank; rank 0 reports).
EvalResult run_evaluation(const TrainConfig& cfg, Communicator& world, std::ostream& log);

}  // namespace shardft
