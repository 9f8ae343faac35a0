#include "tools/metrics_plot.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tools/line_chart.hpp"
#include "io/png.hpp"
#include "io/safetensors.hpp"

namespace shardft {

namespace {

// The metrics plotted: a value of another type than a number (or null) there is an error.
const char* const kPlotted[] = {"loss", "eval_loss", "learning_rate", "grad_norm", "step_seconds", "tokens_per_second"};

bool is_plotted(const std::string& key) {
  for (const char* k : kPlotted) {
    if (key == k) return true;
  }
  return false;
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string parse_message(const std::exception& e) {
  std::string m = e.what();
  const auto close = m.find("] ");
  return m.rfind("[json.exception", 0) == 0 && close != std::string::npos ? m.substr(close + 2) : m;
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

MetricsLog read_metrics_log(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw FormatError(path + ": cannot open" + (std::filesystem::exists(path) ? "" : " (no such file)") +
                      "; it is written by `shardft train` in output_dir");
  }
  MetricsLog log;
  log.path = path;
  std::string text;
  long line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++log.lines;
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
      throw FormatError(where + "not a JSON object: " + parse_message(e));
    }
    if (!j.is_object()) throw FormatError(where + "expected a JSON object, got " + std::string(j.type_name()));
    const char* step_key = j.contains("step") ? "step" : j.contains("global_step") ? "global_step" : nullptr;
    if (!step_key) continue;  // no step to put its values at
    const nlohmann::json& sj = j[step_key];
    if (!sj.is_number() || !std::isfinite(sj.get<double>()) || sj.get<double>() < 0 ||
        sj.get<double>() != std::floor(sj.get<double>())) {
      throw FormatError(where + "'" + step_key + "' is " + sj.dump() + ", not a step number");
    }
    const long step = static_cast<long>(sj.get<double>());
    for (const auto& [key, value] : j.items()) {
      if (key == "step" || key == "global_step") continue;
      if (value.is_number()) {
        log.series[key][step] = value.get<double>();
      } else if (is_plotted(key) && !value.is_null()) {  // null: a non-finite value, as nlohmann writes one
        throw FormatError(where + "'" + key + "' is " + value.dump() + ", not a number");
      }
    }
  }
  if (log.lines == 0) throw FormatError(path + ": empty file, no training step was logged in it");
  if (!log.series.count("loss")) {
    throw FormatError(path + ":" + std::to_string(line_no) + ": no line of the file has a 'step' and a 'loss'");
  }
  return log;
}

std::vector<PlotFile> write_metric_plots(const MetricsLog& log, const std::string& out_dir,
                                         const std::string& run_name) {
  namespace c = chart_colors;
  std::filesystem::create_directories(out_dir);
  const auto series_of = [&](const std::string& key, const std::string& name, Rgb color) {
    ChartSeries s;
    s.name = name;
    s.color = color;
    const auto it = log.series.find(key);
    if (it == log.series.end()) return s;
    for (const auto& [step, v] : it->second) {
      s.x.push_back(static_cast<double>(step));
      s.y.push_back(v);
    }
    s.markers = s.x.size() <= 50;  // few points: show each
    return s;
  };
  const auto last_of = [&](const ChartSeries& s) {
    return s.name + " " + short_number(s.y.back()) + " at step " + std::to_string(static_cast<long>(s.x.back()));
  };

  struct Spec {
    const char* file;
    const char* key;
    const char* title;
  };
  const Spec specs[] = {{"loss.png", "loss", "training loss"},
                        {"learning_rate.png", "learning_rate", "learning rate"},
                        {"grad_norm.png", "grad_norm", "gradient norm (before clipping)"},
                        {"step_time.png", "step_seconds", "seconds per optimizer step"},
                        {"tokens_per_second.png", "tokens_per_second", "tokens per second (all ranks)"}};
  std::vector<PlotFile> plots;
  for (const Spec& spec : specs) {
    PlotFile f;
    f.path = (std::filesystem::path(out_dir) / spec.file).string();
    f.title = spec.title;
    f.metric = spec.key;
    plots.push_back(f);
    LineChart chart;
    chart.title = spec.title;
    chart.x_label = "step";
    chart.integer_x = true;
    chart.series.push_back(series_of(spec.key, spec.key, c::blue));
    if (chart.series[0].x.empty()) continue;  // not logged (an older metrics.jsonl): no file
    std::string last = last_of(chart.series[0]);
    if (std::string(spec.key) == "loss") {
      ChartSeries eval = series_of("eval_loss", "eval_loss", c::orange);
      if (!eval.x.empty()) {
        eval.markers = true;
        last += ", " + last_of(eval);
        chart.series.push_back(std::move(eval));
      }
    }
    chart.subtitle = (run_name.empty() ? "" : run_name + ": ") + last;
    const Canvas image = render_line_chart(chart);
    write_png_rgb(f.path, image.width(), image.height(), image.rgb());
    for (const ChartSeries& s : chart.series) plots.back().points += s.x.size();
  }
  return plots;
}

}  // namespace shardft
