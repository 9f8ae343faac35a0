#include "train/training_step.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "kernels/kernel_timer.hpp"

namespace shardft {

namespace {

// Test hook: SHARDFT_FAULT="RANK:STEP:throw|exit" makes that rank fail before that optimizer step,
// so tests can prove that the other ranks are ended, never left waiting in a collective.
void maybe_inject_fault(int rank, long step) {
  static const char* spec = std::getenv("SHARDFT_FAULT");
  if (!spec) return;
  int fault_rank = -1;
  long fault_step = -1;
  char kind[16] = {0};
  if (std::sscanf(spec, "%d:%ld:%15s", &fault_rank, &fault_step, kind) != 3) return;
  if (fault_rank != rank || fault_step != step) return;
  if (std::string(kind) == "exit") std::_Exit(3);  // dies without a word, like a killed process
  throw std::runtime_error("injected fault (SHARDFT_FAULT) before step " + std::to_string(step));
}

// A step whose loss or gradient norm is NaN or Inf names the step and where the bad values are.
std::string nonfinite_step_message(long step, const StepStats& st, const std::string& first_bad,
                                   const std::string& adapter_path) {
  std::ostringstream m;
  m << "step " << step << ": " << (std::isfinite(st.loss) ? "the gradient norm" : "the loss") << " is not finite (loss "
    << st.loss << ", grad_norm " << st.grad_norm << ", learning_rate " << st.learning_rate << "); ";
  if (first_bad.empty()) {
    m << "every weight is still finite, so the overflow is in the activations or the loss";
  } else {
    m << "the first parameter holding NaN/Inf after the update is " << first_bad
      << " (its gradient or its weights were not finite)";
    // LoRA factors loaded from an adapter folder: the folder is where the values (or lora_alpha) came from.
    if (!adapter_path.empty() && first_bad.find(".lora_") != std::string::npos) {
      m << "; the LoRA factors started from adapter_path '" << adapter_path
        << "' (adapter_model.safetensors, and lora_alpha in adapter_config.json)";
    }
  }
  m << ". Check learning_rate, max_grad_norm and the data of this step, or resume from the last checkpoint";
  return m.str();
}

}  // namespace

TrainingStep::TrainingStep(Trainer& tr, BatchSource& batches, long first_step, int rank, bool debug_traffic,
                           std::string adapter_path)
    : tr_(tr),
      batches_(batches),
      first_step_(first_step),
      rank_(rank),
      debug_traffic_(debug_traffic),
      adapter_path_(std::move(adapter_path)) {}

StepStats TrainingStep::run(long step, std::ostream& log, ProgressBar* bar) {
  maybe_inject_fault(rank_, step + 1);
  const std::vector<TokenBatch> batch = [&] {
    const HostPhase phase("collate the batch");
    return batches_.step_batches(step);
  }();
  const StepStats st = tr_.step(batch);
  last_kernels_ = tr_.last_step_kernels();
  last_kernels_step_ = step + 1;
  report_first_steps(step, log, bar);
  // fp16: an overflowing step was skipped on every rank (weights untouched) and the loss scale lowered.
  if (!st.skipped && (!std::isfinite(st.loss) || !std::isfinite(st.grad_norm))) {
    throw std::runtime_error(nonfinite_step_message(step + 1, st, tr_.first_nonfinite_parameter(), adapter_path_));
  }
  if (st.skipped) {
    if (bar) bar->clear();
    log << "step " << step + 1 << ": fp16 gradient overflow at loss scale " << st.loss_scale
        << "; update skipped, loss scale now " << tr_.loss_scaler().scale() << std::endl;
  }
  return st;
}

void TrainingStep::report_first_steps(long step, std::ostream& log, ProgressBar* bar) {
  if (step == first_step_ && kernel_timer_installed()) {
    restart_kernel_timer();
    log << "kernel times (SHARDFT_KERNEL_TIMES): from step " << step + 2 << " on; step " << step + 1
        << " built graphs and sized buffers" << std::endl;
  }
  if (step - first_step_ < 2 && debug_traffic_) {
    // The first step sizes every buffer; the second shows what each later one moves (kernels/device_traffic.hpp).
    if (bar) bar->clear();
    log << "host<->device traffic of step " << step + 1 << (step == first_step_ ? " (first: sizes the buffers)" : "")
        << ", forward to weight refresh: " << tr_.last_step_traffic().describe(step == first_step_ ? 0 : 12)
        << "; then 1 read-back of the loss, gradient norm and non-finite count" << std::endl;
  }
}

}  // namespace shardft
