#include "train/run_metrics.hpp"

#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "config/train_config.hpp"

namespace shardft {

std::string default_logging_dir(const std::string& output_dir, const std::string& run_name) {
  std::string leaf = run_name;
  if (leaf.empty()) {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%b%d_%H-%M-%S", &local);
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "localhost");
    leaf = std::string(stamp) + "_" + host;
  }
  return (std::filesystem::path(output_dir) / "runs" / leaf).string();
}

Scalars tensorboard_scalars(const nlohmann::json& record) {
  Scalars out;
  for (auto it = record.begin(); it != record.end(); ++it) {
    const std::string& key = it.key();
    if (key == "step" || !it.value().is_number()) continue;
    const bool eval = key.rfind("eval_", 0) == 0;
    out.emplace_back(eval ? "eval/" + key.substr(5) : "train/" + key, it.value().get<double>());
  }
  return out;
}

RunMetrics::RunMetrics(const RunMetricsConfig& c) {
  const std::string path = c.output_dir + "/metrics.jsonl";
  jsonl_ = std::make_unique<std::ofstream>(path, c.resumed ? std::ios::app : std::ios::trunc);
  if (!*jsonl_) throw ConfigError("output_dir: cannot write '" + path + "'");
  if (c.report_to == "tensorboard" || c.report_to == "all") {
    tensorboard_dir_ = c.logging_dir.empty() ? default_logging_dir(c.output_dir, c.run_name) : c.logging_dir;
    try {
      tensorboard_ = std::make_unique<EventFileWriter>(tensorboard_dir_);
    } catch (const std::runtime_error& e) {
      throw ConfigError(e.what());  // a folder the user named (or output_dir) that cannot be written
    }
  }
}

void RunMetrics::add(const nlohmann::json& record, std::int64_t step) {
  if (!jsonl_) return;
  *jsonl_ << record.dump() << std::endl;
  if (tensorboard_) tensorboard_->add_scalars(step, tensorboard_scalars(record));
}

std::string python_dict_line(const std::vector<std::pair<std::string, double>>& values) {
  std::ostringstream s;
  s << std::setprecision(6) << "{";
  for (std::size_t i = 0; i < values.size(); ++i) s << (i ? ", " : "") << "'" << values[i].first << "': " << values[i].second;
  s << "}";
  return s.str();
}

}  // namespace shardft
