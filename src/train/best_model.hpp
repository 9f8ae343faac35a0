#pragma once
// The best evaluation so far and early stopping, as HF's Trainer and EarlyStoppingCallback judge them.
//
// Each evaluation during training gives one value of metric_for_best_model. It is a new best when there
// is none yet or it beats the best (strictly, in greater_is_better's direction); the best checkpoint
// is the one saved at that step. Early stopping counts evaluations in a row that did not beat the
// previous best by more than early_stopping_threshold (HF compares before updating the best, so a
// small improvement becomes the best and still counts as no improvement); at early_stopping_patience
// such evaluations the run stops. The state travels in every checkpoint, so a resumed run judges on.
#include <string>

#include <nlohmann/json.hpp>

#include "config/eval_section.hpp"

namespace shardft {

class BestModelTracker {
 public:
  explicit BestModelTracker(BestModelRule rule) : rule_(std::move(rule)) {}

  struct Verdict {
    bool new_best = false;  // this evaluation is the best so far
    bool stop = false;      // patience is exhausted: stop after this step
  };
  Verdict observe(double value, long step);

  // A checkpoint was saved at `step` as `name`: it becomes the best checkpoint where that step is the best.
  void checkpoint_saved(long step, const std::string& name);

  bool has_best() const { return has_best_; }
  double best_value() const { return best_; }
  long best_step() const { return best_step_; }
  const std::string& best_checkpoint() const { return best_checkpoint_; }  // "" where none was saved at the best
  int evaluations_without_improvement() const { return bad_evaluations_; }
  const BestModelRule& rule() const { return rule_; }

  // "eval_loss 0.4321 at step 40 (checkpoint-40)"
  std::string describe_best() const;
  // Why patience ran out, for the log.
  std::string describe_stop() const;

  // The state a checkpoint carries; restore() takes what state() gave (an empty object: nothing yet).
  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

 private:
  bool better(double a, double b) const { return rule_.greater_is_better ? a > b : a < b; }

  BestModelRule rule_;
  bool has_best_ = false;
  double best_ = 0.0;
  long best_step_ = 0;
  std::string best_checkpoint_;
  int bad_evaluations_ = 0;
};

}  // namespace shardft
