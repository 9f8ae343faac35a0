#pragma once
// The start of a training run, before its loop: the tokenizer and chat template, the training and
// eval data, the MFU basis, metrics.jsonl, the trainer's start-up lines, the resume point and the
// run's description. Each step logs on rank 0's `log` in the order the run prints them.
#include <cstdint>
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
#include "train/mfu.hpp"
#include "train/output_dir_claim.hpp"
#include "train/run_metrics.hpp"
#include "train/step_logger.hpp"
#include "train/tokenizer_export.hpp"
#include "train/trainer.hpp"
#include "train/training_eval.hpp"

namespace shardft {

// The recipe's tokenizer and chat template (its keys), checked against the model's vocabulary.
struct TextPipeline {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatEncoder> encoder;
};
TextPipeline text_pipeline(const std::string& tokenizer_name_or_path, const std::string& chat_template, int vocab_size,
                           std::ostream& log);

// The eval conversations (eval_samples of them), and which tokens of each take loss.
std::vector<Conversation> eval_subset(const EvalConfig& cfg, const ChatEncoder& encoder, std::ostream& log,
                                      std::vector<LossOn>* losses = nullptr);

// What a training run reads before it trains; a bad eval file fails here, before training.
struct RunData {
  TextPipeline text;
  TrainingSetConfig training;
  TrainingSet train_set;
  TokenizerExport tokenizer_files;  // beside every checkpoint and the model
  EvalConfig eval;
  EvalSet eval_set;
};
// `writer`: this rank writes the tokenized-set cache.
RunData read_run_data(const TrainConfig& cfg, bool writer, std::ostream& log);

// With packing: how the samples filled the rows.
void report_packing(const TrainingSetConfig& cfg, const TrainingSet& set, std::ostream& log);

// The training FLOPs per token of `model` at the samples' mean length and the peak per rank, logged.
MfuBasis mfu_basis(const ModelConfig& model, const PeakFlops& peak, const std::vector<TokenizedSample>& samples, int ranks,
                   std::ostream& log);

// metrics.jsonl (and TensorBoard's event files) on the writing rank; inactive elsewhere.
RunMetrics open_run_metrics(const RunMetricsConfig& cfg, bool writer, std::ostream& log);

// The trainer's start-up lines: weights not loaded, attention, a LoRA base without weights, the memory estimate.
// model_name_or_path and seed: the recipe's (a LoRA base without weights is randomly initialised from seed);
// optimizer_overlap_sms: the recipe's, said to have no effect where the optimizer step is not overlapped.
void describe_trainer(Trainer& tr, const std::string& model_name_or_path, std::uint64_t seed, int optimizer_overlap_sms,
                      std::ostream& log);

// Where the loop starts.
struct StartPoint {
  long step = 0;          // optimizer steps done
  double total_loss = 0;  // their losses summed
  std::string run_id;
};
// Collective over host_world. A fresh run: step 0 with `run_id`. resume_from_checkpoint: the checkpoint's
// state (its run id, the evaluator's best so far), output_dir claimed under that id.
StartPoint start_point(const OutputDirConfig& cfg, Trainer& tr, TrainingEvaluator& evaluator, Communicator& host_world,
                       std::string run_id, std::ostream& log);

// "shardft train: N parameters, ..." with the global batch, the step plan and the per-rank state.
void describe_run(const TrainConfig& cfg, const ParallelPlan& parallel, Trainer& tr, const StepPlan& plan,
                  std::size_t num_samples, std::ostream& log);

}  // namespace shardft
