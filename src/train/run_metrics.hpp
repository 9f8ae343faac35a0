#pragma once
// Where a run's logged metrics go: metrics.jsonl in output_dir (a JSON record per logging step, then the
// run's closing record), and, where report_to asks for it, TensorBoard event files in logging_dir
// (io/tensorboard_events.hpp) under the tags HF's TensorBoardCallback gives them: eval_x as eval/x, every
// other number x as train/x, at the record's step.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/tensorboard_events.hpp"

namespace shardft {

struct RunMetricsConfig {
  std::string output_dir;
  std::string report_to = "none";  // none | tensorboard | all
  std::string logging_dir;         // "": default_logging_dir(output_dir, run_name)
  std::string run_name;
  bool resumed = false;            // metrics.jsonl continues the log of the run it resumes
};

// HF's default: output_dir/runs/<Mon>DD_HH-MM-SS_<host> (local time); output_dir/runs/<run_name> where
// a run name is given.
std::string default_logging_dir(const std::string& output_dir, const std::string& run_name);

// A record's numbers under HF's TensorBoard tags (booleans, strings and the step itself left out).
Scalars tensorboard_scalars(const nlohmann::json& record);

// A log line as trl prints them, Python's dict repr: {'loss': 1.234, 'epoch': 0.5}
std::string python_dict_line(const std::vector<std::pair<std::string, double>>& values);

class RunMetrics {
 public:
  RunMetrics() = default;  // inactive: what ranks other than the writer hold
  // Opens metrics.jsonl (and the event file); throws std::runtime_error naming a path it cannot write.
  explicit RunMetrics(const RunMetricsConfig& c);
  // A logging step's record (with its "step"), or the closing record at the run's last step.
  void add(const nlohmann::json& record, std::int64_t step);
  // The folder TensorBoard reads; "" where report_to is none.
  std::string tensorboard_dir() const { return tensorboard_ ? tensorboard_dir_ : std::string(); }

 private:
  std::unique_ptr<std::ofstream> jsonl_;
  std::unique_ptr<EventFileWriter> tensorboard_;
  std::string tensorboard_dir_;
};

}  // namespace shardft
