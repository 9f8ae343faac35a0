// metrics.jsonl read back for `shardft plot`: steps, the summary's eval_loss, repeated steps, nulls;
// the charts written as valid PNGs; every bad file named, with the line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/safetensors.hpp"
#include "png_check.hpp"
#include "tools/metrics_plot.hpp"

namespace shardft {
namespace {
namespace fs = std::filesystem;
using namespace testing_png;

class MetricsPlot : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shardft_plot_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& text) {
    const std::string path = (dir_ / "metrics.jsonl").string();
    std::ofstream(path) << text;
    return path;
  }
  std::string error_of(const std::string& text) {
    try {
      read_metrics_log(write(text));
    } catch (const FormatError& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

TEST_F(MetricsPlot, ReadsStepsAndTheSummary) {
  const std::string path = write(
      R"({"step": 1, "loss": 3.0, "grad_norm": 1.5, "learning_rate": 1e-4, "step_seconds": 0.5, "tokens_per_second": 900})"
      "\n"
      R"({"step": 2, "loss": 2.5, "grad_norm": null, "learning_rate": 2e-4, "mfu": 0.1})"
      "\n\n"
      R"({"step": 2, "loss": 2.4, "learning_rate": 2e-4})"
      "\n"
      R"({"train_runtime": 3.0, "global_step": 2, "eval_loss": 2.6})"
      "\n");
  const MetricsLog log = read_metrics_log(path);
  EXPECT_EQ(log.lines, 4);
  EXPECT_EQ(log.series.at("loss"), (std::map<long, double>{{1, 3.0}, {2, 2.4}}));  // the repeated step: last wins
  EXPECT_EQ(log.series.at("grad_norm"), (std::map<long, double>{{1, 1.5}}));       // null left out
  EXPECT_EQ(log.series.at("eval_loss"), (std::map<long, double>{{2, 2.6}}));
  const std::vector<PlotFile> files = write_metric_plots(log, (dir_ / "plots").string(), "run");
  std::vector<std::string> names;
  for (const PlotFile& f : files) {
    ASSERT_GT(f.points, 0u) << f.path;
    names.push_back(fs::path(f.path).filename().string());
    std::ifstream in(f.path, std::ios::binary);
    const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const DecodedPng d = check_and_decode(bytes);
    EXPECT_EQ(d.width, 800);
    EXPECT_EQ(d.height, 500);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"loss.png", "learning_rate.png", "grad_norm.png", "step_time.png",
                                             "tokens_per_second.png"}));
  EXPECT_EQ(files[0].points, 3u);  // two loss points and the eval point
}

TEST_F(MetricsPlot, MetricsNotLoggedAreNotDrawn) {
  const MetricsLog log = read_metrics_log(write("{\"step\": 5, \"loss\": 2.0}\n{\"step\": 10, \"loss\": 1.5}\n"));
  const std::vector<PlotFile> files = write_metric_plots(log, (dir_ / "plots").string(), "");
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(files[0].points, 2u);
  EXPECT_TRUE(fs::exists(files[0].path));
  for (std::size_t i = 1; i < files.size(); ++i) {
    EXPECT_EQ(files[i].points, 0u) << files[i].metric;
    EXPECT_FALSE(fs::exists(files[i].path)) << files[i].path;
  }
  EXPECT_EQ(files[3].metric, "step_seconds");
}

TEST_F(MetricsPlot, BadFilesAreNamedWithTheLine) {
  EXPECT_NE(error_of("").find("metrics.jsonl: empty"), std::string::npos) << error_of("");
  EXPECT_NE(error_of("\n  \n").find("empty"), std::string::npos);
  const std::string bad_json = error_of("{\"step\": 1, \"loss\": 2}\n{\"step\": 2, \"loss\": \n");
  EXPECT_NE(bad_json.find("metrics.jsonl:2: not a JSON object"), std::string::npos) << bad_json;
  const std::string array = error_of("{\"step\": 1, \"loss\": 2}\n[1, 2]\n");
  EXPECT_NE(array.find("metrics.jsonl:2: expected a JSON object, got array"), std::string::npos) << array;
  const std::string text_loss = error_of("{\"step\": 1, \"loss\": 2}\n\n{\"step\": 3, \"loss\": \"nan\"}\n");
  EXPECT_NE(text_loss.find("metrics.jsonl:3: 'loss' is \"nan\", not a number"), std::string::npos) << text_loss;
  const std::string bad_step = error_of("{\"step\": 1.5, \"loss\": 2}\n");
  EXPECT_NE(bad_step.find("metrics.jsonl:1: 'step' is 1.5, not a step number"), std::string::npos) << bad_step;
  const std::string no_loss = error_of("{\"train_runtime\": 1}\n");
  EXPECT_NE(no_loss.find("no line of the file has a 'step' and a 'loss'"), std::string::npos) << no_loss;
  try {
    read_metrics_log((dir_ / "absent" / "metrics.jsonl").string());
    FAIL() << "no error for a missing file";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("absent/metrics.jsonl: cannot open (no such file)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace shardft
