#pragma once
// The training loop's checkpointer: after each optimizer step, whether a checkpoint is due (save_strategy
// steps / epoch through checkpoint_due, a preempted run always, save_strategy best at a new best
// evaluation), and the save itself (train/checkpoint.hpp) with the run's state: its id, the loss summed
// so far and, where evaluation judges a best model, the best so far.
#include <ostream>
#include <string>

#include "config/checkpoint_section.hpp"
#include "data/sampler.hpp"
#include "io/progress_bar.hpp"
#include "train/best_model.hpp"
#include "train/checkpoint.hpp"
#include "train/tokenizer_export.hpp"
#include "train/trainer.hpp"
#include "train/training_eval.hpp"

namespace shardft {

class Checkpointer {
 public:
  // run_id: the run's (train/output_dir_claim.hpp). tokenizer: the files each checkpoint carries. Every
  // reference must outlive the checkpointer.
  Checkpointer(CheckpointConfig cfg, Trainer& tr, TrainingEvaluator& evaluator, const TokenizerExport& tokenizer,
               const StepPlan& plan, std::string run_id);

  // Whether a checkpoint follows step `step` (1-based): `judged` is the step's evaluation (default: none;
  // its stop makes this step the last), `preempted` a stop signal.
  bool due(long step, const BestModelTracker::Verdict& judged, bool preempted) const;

  // Collective over the trainer's world. Saves step `step`'s checkpoint where due, saying "saved DIR" on
  // `log` (the progress bar cleared first); `total_loss`: the step losses summed up to it.
  void after_step(long step, const BestModelTracker::Verdict& judged, bool preempted, double total_loss,
                  std::ostream& log, ProgressBar* bar);

 private:
  // What a checkpoint at `step` carries, with the best so far (its own name where this step is the best).
  CheckpointState state(long step, double total_loss);

  CheckpointConfig cfg_;
  Trainer& tr_;
  TrainingEvaluator& evaluator_;
  const TokenizerExport& tokenizer_;
  StepPlan plan_;
  std::string run_id_;
};

}  // namespace shardft
