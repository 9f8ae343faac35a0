#pragma once
// The training loop's logger: sums each step into the running window of the current logging interval
// and into the run's totals, decides which steps log (every logging_steps, the plan's last step, and
// the first with logging_first_step), and at those builds one record of the window from which both
// sinks are written: the console's trl-style dict line and metrics.jsonl's record (with TensorBoard's
// train/ tags, train/run_metrics.hpp). The two show different fields: each field says where it goes.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/sampler.hpp"
#include "io/progress_bar.hpp"
#include "train/loss_scaler.hpp"
#include "train/run_metrics.hpp"
#include "train/trainer.hpp"

namespace shardft {

// What MFU is measured against: the model's training FLOPs per token and one rank's peak (train/mfu.hpp).
struct MfuBasis {
  double flops_per_token = 0;
  double peak_flops = 0;  // per rank
  int ranks = 1;
};

// One logged number. `integral`: metrics.jsonl writes it as an integer (the step, a byte count).
struct LogField {
  std::string key;
  double value = 0;
  bool integral = false;
  bool console = true;  // in the console's line
  bool metrics = true;  // in metrics.jsonl / TensorBoard
};

// A logging step's fields in the console line's order.
struct StepLogRecord {
  std::vector<LogField> fields;
  std::string console_line() const;          // {'loss': 1.23, ...}
  nlohmann::json metrics_record() const;     // {"comm_bytes": ..., "step": 50, ...}
};

class StepLogger {
 public:
  // total_loss: the step losses summed before this process began (a resumed run's checkpoint).
  // loss_scaler: fp16's, whose scale each record shows; null without fp16.
  StepLogger(long logging_steps, bool logging_first_step, const StepPlan& plan, const MfuBasis& mfu,
             double total_loss, const LossScaler* loss_scaler);

  // Sums a finished step into the window and the run's totals. A step whose loss is not finite (an fp16
  // step skipped on overflow) counts as loss 0.
  void add(const StepStats& st);
  // Whether step `step` (1-based) logs.
  bool due(long step) const;
  // The window's record at step `step`, `last` being the step just added; empties the window.
  StepLogRecord take_record(long step, const StepStats& last, std::int64_t peak_memory_bytes);

  // add, then where the step logs: its line on `log` (the progress bar cleared first) and its record into
  // `metrics`.
  void after_step(long step, const StepStats& st, std::ostream& log, RunMetrics& metrics, ProgressBar* bar);

  double total_loss() const { return total_loss_; }     // every step's loss, the resumed-from steps' too
  double tokens_per_second() const;                     // over this process's steps

 private:
  long logging_steps_;
  bool logging_first_step_;
  StepPlan plan_;
  MfuBasis mfu_;
  const LossScaler* loss_scaler_;
  // The window: the steps since the last logging step.
  double window_loss_ = 0, window_seconds_ = 0, window_bytes_ = 0, window_intra_ = 0, window_inter_ = 0;
  std::int64_t window_tokens_ = 0;
  long window_steps_ = 0;
  // The run's totals.
  double total_loss_ = 0;
  double run_tokens_ = 0, run_seconds_ = 0;
};

}  // namespace shardft
