#pragma once
// The end of a training run, after its loop: HF's closing summary line (train_runtime, samples and
// steps per second, train_loss), the reports on fp16, the step's device work and memory, the final
// model (the best checkpoint's with load_best_model_at_end) exported as an HF directory, do_eval's
// evaluation, and metrics.jsonl's closing record. And the way out of a preempted run.
#include <chrono>
#include <ostream>

#include "data/chat_template.hpp"
#include "data/sampler.hpp"
#include "train/evaluate.hpp"
#include "train/run.hpp"
#include "train/run_metrics.hpp"
#include "train/tokenizer_export.hpp"
#include "train/trainer.hpp"
#include "train/training_eval.hpp"

namespace shardft {

// What the end of a run works on; every reference outlives the call.
struct FinishedRun {
  const TrainConfig& cfg;
  const ParallelPlan& parallel;
  Trainer& tr;
  TrainingEvaluator& evaluator;
  const ChatEncoder& encoder;
  const TokenizerExport& tokenizer_files;
  RunMetrics& metrics;
  const StepPlan& plan;
  std::chrono::steady_clock::time_point start;  // when run_training began
  long last_step = 0;                           // the plan's last, or early stopping's
  double total_loss = 0;                        // every step's loss summed, a resumed run's earlier ones too
  const StepKernels* kernels = nullptr;         // the device work of step kernels_step
  long kernels_step = 0;
};

// Collective: everything after the loop, ending at the end-of-run barrier. Rank 0 logs on `log` and
// writes the files.
RunSummary finish_training(const FinishedRun& run, std::ostream& log);

// Collective: a run stopped by a signal after step `step`, at the end-of-run barrier.
RunSummary finish_preempted(long step, const ParallelPlan& parallel);

// {'eval_loss': ..., 'eval_exact_match': ..., 'eval_samples': ...}
void report_eval(const EvalResult& ev, std::ostream& log);

}  // namespace shardft
