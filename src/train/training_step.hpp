#pragma once
// One optimizer step of the training loop: this rank's micro-batches from the batch source through the
// trainer's step, with what the run says about a step as it happens: the kernel timer restarted after
// the first (which builds graphs and sizes buffers), the host<->device traffic of the first two at
// log_level debug, fp16's skipped updates; a loss or gradient norm that is not finite ends the run.
#include <ostream>
#include <string>

#include "data/batch_source.hpp"
#include "io/progress_bar.hpp"
#include "train/trainer.hpp"

namespace shardft {

class TrainingStep {
 public:
  // first_step: the step (0-based) this process starts at; debug_traffic: log_level debug; adapter_path:
  // the recipe's, named when LoRA factors go non-finite. References must outlive the step.
  TrainingStep(Trainer& tr, BatchSource& batches, long first_step, int rank, bool debug_traffic,
               std::string adapter_path);

  // Runs optimizer step `step` (0-based), its lines on `log` (the progress bar cleared first).
  // std::runtime_error naming the step when its loss or gradient norm is not finite (and it was not
  // an fp16 step skipped on overflow).
  StepStats run(long step, std::ostream& log, ProgressBar* bar);

  // The device work of the last step run, and its number (1-based): every step after the first runs
  // the same work.
  const StepKernels& last_kernels() const { return last_kernels_; }
  long last_kernels_step() const { return last_kernels_step_; }

 private:
  void report_first_steps(long step, std::ostream& log, ProgressBar* bar);

  Trainer& tr_;
  BatchSource& batches_;
  long first_step_;
  int rank_;
  bool debug_traffic_;
  std::string adapter_path_;
  StepKernels last_kernels_;
  long last_kernels_step_ = 0;
};

}  // namespace shardft
