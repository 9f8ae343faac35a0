#pragma once
// The training run behind `shardft train`: data, the step loop over epochs, trl-style logs,
// output_dir/metrics.jsonl, the final model and the end-of-run evaluation; and `shardft eval`.
// run_training is the loop; its parts are objects of their own: the start (train/run_setup.hpp), the
// batch source (data/batch_source.hpp), the step (train/training_step.hpp), the logger
// (train/step_logger.hpp), the evaluator (train/training_eval.hpp), the stop-signal check
// (train/stop_check.hpp), the checkpointer (train/checkpointer.hpp) and the end (train/run_end.hpp).
#include <ostream>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "config/train_config.hpp"
#include "data/sampler.hpp"  // StepPlan, plan_steps, micro_batch_indices: the sampler the run trains with
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

// Every rank calls it; only rank 0 of the world writes logs, metrics.jsonl and the model.
RunSummary run_training(const TrainConfig& cfg, const ParallelPlan& plan, std::ostream& log);
RunSummary run_training(const TrainConfig& cfg, Communicator& world, std::ostream& log);

// Loads output_dir/model.safetensors and evaluates it on eval_dataset_path (every rank; rank 0 reports).
EvalResult run_evaluation(const TrainConfig& cfg, Communicator& world, std::ostream& log);

}  // namespace shardft
