#pragma once
// Evaluation during training, under HF's names: eval_strategy (steps: every eval_steps; epoch: at each
// epoch's end and the last step), eval_on_start. Each evaluation runs on the trainer's current weights:
// the loss over the eval set split among the ranks (train/evaluate.hpp's evaluate_loss), and with
// eval_generate greedy generation and exact match as at the end. It logs HF's line
// ({'eval_loss': ..., 'eval_runtime': ..., 'epoch': ...}), adds the record to metrics.jsonl (and
// TensorBoard's eval/ tags), and judges it against the best so far (train/best_model.hpp).
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/eval_section.hpp"
#include "data/chat_template.hpp"
#include "data/datasets.hpp"
#include "data/training_set.hpp"
#include "data/sft_data.hpp"
#include "train/best_model.hpp"
#include "train/run_metrics.hpp"
#include "train/trainer.hpp"

namespace shardft {

// What a run evaluates: the held-out training samples (val_set_size), or the eval conversations
// (eval_dataset_path, capped at eval_samples), tokenized as training tokenizes.
struct EvalSet {
  std::vector<TokenizedSample> samples;    // the loss is taken over these
  std::vector<Conversation> conversations;  // generation prompts; empty for a held-out split
  std::vector<LossOn> loss_on;              // per conversation: which of its tokens take loss
};

// held_out: the training set's val_set_size split; conversations: eval_dataset_path's, eval_samples applied.
// The samples are tokenized only where the run evaluates during training.
EvalSet make_eval_set(const EvalConfig& cfg, const ChatEncoder& encoder, std::vector<TokenizedSample> held_out,
                      std::vector<Conversation> conversations, std::vector<LossOn> loss_on);

class TrainingEvaluator {
 public:
  TrainingEvaluator(EvalConfig cfg, EvalSet set, const ChatEncoder& encoder);

  // Whether eval_strategy asks for an evaluation after step `step` (1-based).
  bool due(long step, long steps_per_epoch, long total_steps) const;

  // Collective over the trainer's world. Evaluates, logs (rank 0's `log`), records into `metrics` at
  // `step`; `judged`: an evaluation that counts for the best model (eval_on_start's does not).
  BestModelTracker::Verdict evaluate(Trainer& tr, long step, double epoch, bool judged, std::ostream& log,
                                     RunMetrics& metrics);

  // judges_best_model of the recipe (config/train_config.hpp).
  bool judges_best() const { return cfg_.judges_best_model; }
  const EvalConfig& config() const { return cfg_; }
  BestModelTracker& tracker() { return tracker_; }
  const EvalSet& set() const { return set_; }

 private:
  EvalConfig cfg_;
  EvalSet set_;
  const ChatEncoder& encoder_;
  BestModelTracker tracker_;
};

}  // namespace shardft
