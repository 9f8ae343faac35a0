#pragma once
// `shardft plot`: metrics.jsonl read back (one JSON object per logged step, as run_training writes
// it, plus the final summary line) and drawn as PNG line charts.
#include <map>
#include <string>
#include <vector>

namespace shardft {

// Every numeric field of metrics.jsonl by name, each as step -> value. A line's step is its "step"
// (logging lines) or its "global_step" (the summary, which carries eval_loss). A later line for the same
// step replaces an earlier one, so the log of a resumed run that repeats steps reads as its last attempt.
struct MetricsLog {
  std::string path;
  std::map<std::string, std::map<long, double>> series;
  long lines = 0;  // non-blank lines read
};

// Throws FormatError naming the file, and the line for a line that is no JSON object or whose
// step or a plotted metric is not a number; also when the file is missing, empty or logs no loss.
MetricsLog read_metrics_log(const std::string& path);

struct PlotFile {
  std::string path;
  std::string title;
  std::string metric;      // its key in metrics.jsonl
  std::size_t points = 0;  // 0: the metric was not logged and the file was not written
};

// loss.png (with eval_loss points when logged), learning_rate.png, grad_norm.png, step_time.png and
// tokens_per_second.png in out_dir (created), each when its metric was logged (the others come back
// with no points). `run_name` goes in the subtitles.
std::vector<PlotFile> write_metric_plots(const MetricsLog& log, const std::string& out_dir,
                                         const std::string& run_name);

}  // namespace shardft
