// `shardft plot RUN_DIR [--output DIR]`: PNG charts of a run's metrics.jsonl.
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "config/train_config.hpp"
#include "tools/metrics_plot.hpp"
#include "train/output_path.hpp"

namespace shardft::cli {

int plot(const std::vector<std::string>& args, std::ostream& out) {
  namespace fs = std::filesystem;
  std::string run_dir, output_dir;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--output") {
      if (i + 1 >= args.size()) throw ConfigError("--output: expected a directory after it");
      output_dir = args[++i];
    } else if (a.rfind("--output=", 0) == 0) {
      output_dir = a.substr(9);
    } else if (a.rfind("--", 0) == 0) {
      throw ConfigError("plot: unknown option '" + a + "'");
    } else if (run_dir.empty()) {
      run_dir = a;
    } else {
      throw ConfigError("plot: one run directory, got '" + run_dir + "' and '" + a + "'");
    }
  }
  if (run_dir.empty()) throw ConfigError("usage: shardft plot RUN_DIR [--output DIR]");
  // RUN_DIR is a training output_dir; its metrics.jsonl itself is taken too.
  const bool is_file = fs::is_regular_file(run_dir);
  const fs::path dir = is_file ? fs::path(run_dir).parent_path() : fs::path(run_dir);
  const std::string metrics = is_file ? run_dir : (dir / "metrics.jsonl").string();
  if (output_dir.empty()) output_dir = (dir / "plots").string();

  const MetricsLog log = read_metrics_log(metrics);
  create_output_dir(output_dir, "--output");
  const std::string run_name = fs::weakly_canonical(fs::absolute(metrics)).parent_path().filename().string();
  const std::vector<PlotFile> files = write_metric_plots(log, output_dir, run_name);
  for (const PlotFile& f : files) {
    if (f.points > 0) {
      out << "wrote " << f.path << " (" << f.title << ", " << f.points << " point" << (f.points > 1 ? "s" : "")
          << ")\n";
    } else {
      out << "not drawn: " << f.path << " (" << metrics << " logs no " << f.metric << ")\n";
    }
  }
  return 0;
}

}  // namespace shardft::cli
