#include "train/step_logger.hpp"

#include "kernels/kernel_timer.hpp"

#include <cmath>

#include "train/process_memory.hpp"

namespace shardft {

std::string StepLogRecord::console_line() const {
  std::vector<std::pair<std::string, double>> line;
  for (const LogField& f : fields) {
    if (f.console) line.emplace_back(f.key, f.value);
  }
  return python_dict_line(line);
}

nlohmann::json StepLogRecord::metrics_record() const {
  nlohmann::json record = nlohmann::json::object();
  for (const LogField& f : fields) {
    if (!f.metrics) continue;
    if (f.integral) {
      record[f.key] = static_cast<std::int64_t>(f.value);
    } else {
      record[f.key] = f.value;
    }
  }
  return record;
}

StepLogger::StepLogger(long logging_steps, bool logging_first_step, const StepPlan& plan, const MfuBasis& mfu,
                       double total_loss, const LossScaler* loss_scaler)
    : logging_steps_(logging_steps),
      logging_first_step_(logging_first_step),
      plan_(plan),
      mfu_(mfu),
      loss_scaler_(loss_scaler),
      total_loss_(total_loss) {}

void StepLogger::add(const StepStats& st) {
  const double step_loss = std::isfinite(st.loss) ? st.loss : 0.0;  // a skipped step's forward may overflow
  window_loss_ += step_loss;
  total_loss_ += step_loss;
  window_seconds_ += st.seconds;
  window_tokens_ += st.tokens;
  window_bytes_ += st.comm_bytes;
  window_intra_ += st.comm_bytes_intra_node;
  window_inter_ += st.comm_bytes_inter_node;
  ++window_steps_;
  run_tokens_ += static_cast<double>(st.tokens);
  run_seconds_ += st.seconds;
}

bool StepLogger::due(long step) const {
  return step % logging_steps_ == 0 || step == plan_.total_steps || (logging_first_step_ && step == 1);
}

StepLogRecord StepLogger::take_record(long step, const StepStats& last, std::int64_t peak_memory_bytes) {
  const double steps = static_cast<double>(window_steps_);
  const double tps = window_seconds_ > 0 ? static_cast<double>(window_tokens_) / window_seconds_ : 0.0;
  const double mfu = mfu_.flops_per_token * tps / (mfu_.peak_flops * static_cast<double>(mfu_.ranks));
  StepLogRecord r;
  r.fields = {{"loss", window_loss_ / steps},
              {"grad_norm", last.grad_norm},
              {"learning_rate", last.learning_rate}};
  // fp16: the scale the next step uses (DeepSpeed logs its current scale)
  if (loss_scaler_) r.fields.push_back({"loss_scale", loss_scaler_->scale()});
  const std::vector<LogField> rest = {
      {"epoch", epoch_at(step, plan_)},
      {"tokens_per_second", tps},
      {"mfu", mfu},
      {"comm_bytes", window_bytes_ / steps},
      {"step_seconds", window_seconds_ / steps, false, false, true},
      {"comm_bytes_intra_node", window_intra_ / steps, false, false, true},
      {"comm_bytes_inter_node", window_inter_ / steps},
      {"step", static_cast<double>(step), true},
      {"peak_memory_bytes", static_cast<double>(peak_memory_bytes), true, false, true}};
  r.fields.insert(r.fields.end(), rest.begin(), rest.end());
  window_loss_ = window_seconds_ = window_bytes_ = window_intra_ = window_inter_ = 0;
  window_tokens_ = 0;
  window_steps_ = 0;
  return r;
}

void StepLogger::after_step(long step, const StepStats& st, std::ostream& log, RunMetrics& metrics, ProgressBar* bar) {
  const HostPhase phase("log and metrics");
  add(st);
  if (!due(step)) return;
  if (bar) bar->clear();
  const StepLogRecord r = take_record(step, st, peak_rss_bytes());
  log << r.console_line() << std::endl;
  metrics.add(r.metrics_record(), step);
}

double StepLogger::tokens_per_second() const { return run_tokens_ / run_seconds_; }

}  // namespace shardft
