// The training loop's logger (train/step_logger.hpp): which steps log, the running window each logging
// step reports and empties, and the one record both the console line and metrics.jsonl come from.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "train/step_logger.hpp"

namespace shardft {
namespace {

const StepPlan kPlan{8, 4, 10};  // 8 samples per step, 4 steps per epoch, 10 steps
const MfuBasis kMfu{1e6, 1e9, 2};

StepStats stats(double loss, double grad_norm, double lr, std::int64_t tokens, double seconds, double intra,
                double inter) {
  StepStats st;
  st.loss = loss;
  st.grad_norm = grad_norm;
  st.learning_rate = lr;
  st.tokens = tokens;
  st.seconds = seconds;
  st.comm_bytes = intra + inter;
  st.comm_bytes_intra_node = intra;
  st.comm_bytes_inter_node = inter;
  return st;
}

std::vector<long> logged_steps(long logging_steps, bool first) {
  StepLogger logger(logging_steps, first, kPlan, kMfu, 0, nullptr);
  std::vector<long> out;
  for (long s = 1; s <= kPlan.total_steps; ++s) {
    if (logger.due(s)) out.push_back(s);
  }
  return out;
}

TEST(StepLogger, LogsEveryLoggingStepsAndTheLast) {
  EXPECT_EQ(logged_steps(3, false), (std::vector<long>{3, 6, 9, 10}));
  EXPECT_EQ(logged_steps(5, false), (std::vector<long>{5, 10}));
  EXPECT_EQ(logged_steps(4, true), (std::vector<long>{1, 4, 8, 10}));
}

TEST(StepLogger, RecordAveragesTheWindowForBothSinks) {
  StepLogger logger(2, false, kPlan, kMfu, 0, nullptr);
  logger.add(stats(2.0, 1.5, 0.001, 100, 0.5, 600, 400));
  logger.add(stats(1.0, 0.75, 0.002, 300, 1.5, 1800, 1200));
  const StepLogRecord r = logger.take_record(2, stats(1.0, 0.75, 0.002, 300, 1.5, 1800, 1200), 12345);
  // The console's keys and order are trl's plus throughput; the step last.
  EXPECT_EQ(r.console_line(),
            "{'loss': 1.5, 'grad_norm': 0.75, 'learning_rate': 0.002, 'epoch': 0.5, 'tokens_per_second': 200, "
            "'mfu': 0.1, 'comm_bytes': 2000, 'comm_bytes_inter_node': 800, 'step': 2}");
  // metrics.jsonl has the step time, both byte splits and the memory too; the step and bytes as integers.
  EXPECT_EQ(r.metrics_record().dump(),
            "{\"comm_bytes\":2000.0,\"comm_bytes_inter_node\":800.0,\"comm_bytes_intra_node\":1200.0,"
            "\"epoch\":0.5,\"grad_norm\":0.75,\"learning_rate\":0.002,\"loss\":1.5,\"mfu\":0.1,"
            "\"peak_memory_bytes\":12345,\"step\":2,\"step_seconds\":1.0,\"tokens_per_second\":200.0}");
}

TEST(StepLogger, TakingARecordEmptiesTheWindowNotTheTotals) {
  StepLogger logger(1, false, kPlan, kMfu, 10.0, nullptr);  // resumed with 10.0 summed before
  logger.add(stats(2.0, 1, 0.1, 100, 1.0, 0, 0));
  logger.take_record(1, stats(2.0, 1, 0.1, 100, 1.0, 0, 0), 0);
  logger.add(stats(4.0, 1, 0.1, 50, 0.0, 0, 0));
  const nlohmann::json m = logger.take_record(2, stats(4.0, 1, 0.1, 50, 0.0, 0, 0), 0).metrics_record();
  EXPECT_EQ(m.at("loss").get<double>(), 4.0);
  EXPECT_EQ(m.at("tokens_per_second").get<double>(), 0.0);  // a window without time has no rate
  EXPECT_EQ(m.at("step_seconds").get<double>(), 0.0);
  EXPECT_EQ(logger.total_loss(), 16.0);
  EXPECT_EQ(logger.tokens_per_second(), 150.0);
}

TEST(StepLogger, NonFiniteLossCountsAsZero) {
  StepLogger logger(2, false, kPlan, kMfu, 0, nullptr);
  logger.add(stats(std::numeric_limits<double>::infinity(), 0, 0.1, 10, 1.0, 0, 0));  // an fp16 skipped step
  logger.add(stats(3.0, 1, 0.1, 10, 1.0, 0, 0));
  EXPECT_EQ(logger.take_record(2, stats(3.0, 1, 0.1, 10, 1.0, 0, 0), 0).metrics_record().at("loss").get<double>(), 1.5);
  EXPECT_EQ(logger.total_loss(), 3.0);
}

TEST(StepLogger, Fp16ShowsTheLossScaleAfterTheLearningRate) {
  LossScalerConfig c;
  c.initial_scale = 1024;
  const LossScaler scaler(c);
  StepLogger logger(1, false, kPlan, kMfu, 0, &scaler);
  logger.add(stats(1.0, 1.0, 0.5, 10, 1.0, 0, 0));
  const StepLogRecord r = logger.take_record(1, stats(1.0, 1.0, 0.5, 10, 1.0, 0, 0), 0);
  EXPECT_EQ(r.console_line().rfind("{'loss': 1, 'grad_norm': 1, 'learning_rate': 0.5, 'loss_scale': 1024, 'epoch': 0.25,", 0),
            0u)
      << r.console_line();
  EXPECT_EQ(r.metrics_record().at("loss_scale").get<double>(), 1024.0);
}

TEST(StepLogger, AfterStepWritesOnlyLoggingSteps) {
  StepLogger logger(2, false, kPlan, kMfu, 0, nullptr);
  RunMetrics inactive;
  std::ostringstream log;
  logger.after_step(1, stats(1.0, 1, 0.1, 10, 1.0, 0, 0), log, inactive, nullptr);
  EXPECT_EQ(log.str(), "");
  logger.after_step(2, stats(3.0, 1, 0.1, 10, 1.0, 0, 0), log, inactive, nullptr);
  EXPECT_EQ(log.str().rfind("{'loss': 2, 'grad_norm': 1,", 0), 0u) << log.str();
  EXPECT_EQ(log.str().back(), '\n');
}

}  // namespace
}  // namespace shardft
