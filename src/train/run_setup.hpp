#pragma once
// The start of a training run, before its loop: the tokenizer and chat template, the training and
// eval data, the MFU basis, metrics.jsonl, the trainer's start-up lines, the resume point and the
// run's description. Each step logs on rank 0's `log` in the order the run prints them.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "config/train_config.hpp"
#include "data/chat_template.hpp"
#include "data/sampler.hpp"
#include "tokenizer/tokenizer.hpp"
#include "data/training_set.hpp"
#include "train/run_metrics.hpp"
#include "train/step_logger.hpp"
#include "train/tokenizer_export.hpp"
#include "train/trainer.hpp"
#include "train/training_eval.hpp"

namespace shardft {

// The recipe's tokenizer and chat template, checked against the model's vocabulary.
struct TextPipeline {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatEncoder> encoder;
};
TextPipeline text_pipeline(const TrainConfig& cfg, std::ostream& log);

// The eval conversations (eval_samples of them), and which tokens of each take loss.
std::vector<Conversation> eval_subset(const TrainConfig& cfg, const ChatEncoder& encoder, std::ostream& log,
                                      std::vector<LossOn>* losses = nullptr);

// What a training run reads before it trains; a bad eval file fails here, before training.
struct RunData {
  TextPipeline text;
  TrainingSet train_set;
  TokenizerExport tokenizer_files;  // beside every checkpoint and the model
  EvalSet eval_set;
};
// `writer`: this rank writes the tokenized-set cache.
RunData read_run_data(const TrainConfig& cfg, bool writer, std::ostream& log);

// With packing: how the samples filled the rows.
void report_packing(const TrainConfig& cfg, const TrainingSet& set, std::ostream& log);

// The training FLOPs per token of the model at the samples' mean length and the peak per rank, logged.
MfuBasis mfu_basis(const TrainConfig& cfg, const std::vector<TokenizedSample>& samples, int ranks, std::ostream& log);

// metrics.jsonl (and TensorBoard's event files) on the writing rank; inactive elsewhere.
RunMetrics open_run_metrics(const TrainConfig& cfg, bool writer, std::ostream& log);

// The trainer's start-up lines: weights not loaded, attention, a LoRA base without weights, the memory estimate.
void describe_trainer(const TrainConfig& cfg, Trainer& tr, std::ostream& log);

// Where the loop starts.
struct StartPoint {
  long step = 0;          // optimizer steps done
  double total_loss = 0;  // their losses summed
  std::string run_id;
};
// Collective over host_world. A fresh run: step 0 with `run_id`. resume_from_checkpoint: the checkpoint's
// state (its run id, the evaluator's best so far), output_dir claimed under that id.
StartPoint start_point(const TrainConfig& cfg, Trainer& tr, TrainingEvaluator& evaluator, Communicator& host_world,
                       std::string run_id, std::ostream& log);

// "shardft train: N parameters, ..." with the global batch, the step plan and the per-rank state.
void describe_run(const TrainConfig& cfg, const ParallelPlan& parallel, Trainer& tr, const StepPlan& plan,
                  std::size_t num_samples, std::ostream& log);

}  // namespace shardft
