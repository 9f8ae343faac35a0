// DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR as a "scheduler" block runs them: each case of
// tests/reference/deepspeed_lr.json (made by make_deepspeed_lr.py from DeepSpeed's lr_schedules.py and
// the engine's stepping) goes through shardft's DeepSpeed-config reader and recipe flags like a user's
// ds_config.json, and every optimizer step's rate must match DeepSpeed's to 1e-12 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/train_config.hpp"
#include "train/lr_schedule.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

nlohmann::json reference_cases() {
  const std::string path = SHARDFT_REFERENCE_DIR "/deepspeed_lr.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in).at("cases");
}

TEST(LrScheduleDeepSpeed, EveryStepMatchesDeepSpeedsReference) {
  const nlohmann::json cases = reference_cases();
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const std::string ds_path = ::testing::TempDir() + "ds_lr_" + name + ".json";
    std::ofstream(ds_path) << c.at("ds_config").dump();
    const TrainConfig cfg = load_train_config("", c.at("recipe").get<std::vector<std::string>>(), ds_path);
    EXPECT_TRUE(is_deepspeed_schedule(cfg.lr_scheduler_type)) << cfg.lr_scheduler_type;
    const std::vector<double> want = c.at("learning_rate");
    // total_num_steps (given or "auto") is the run's max_steps; WarmupLR has no total.
    const long total = cfg.max_steps > 0 ? cfg.max_steps : static_cast<long>(want.size());
    const LrSchedule schedule{lr_schedule_config(cfg, total)};
    for (std::size_t step = 0; step < want.size(); ++step) {
      const double got = schedule.at(static_cast<long>(step));
      EXPECT_LE(std::abs(got - want[step]), 1e-12 * std::abs(want[step])) << "step " << step << ": " << got
                                                                              << " vs DeepSpeed's " << want[step];
    }
  }
}

// The engine's offset in plain numbers: step 0 runs before the scheduler's first step (iteration -1),
// step 1 at iteration 0, whose log warm-up factor log(1) is 0 too.
TEST(LrScheduleDeepSpeed, TheFirstTwoStepsRunAtTheWarmupStart) {
  LrSchedule s;
  s.type = "ds_warmup";
  s.peak_lr = 1.0;
  s.warmup_min_lr = 0.25;
  s.warmup_steps = 4;
  EXPECT_EQ(s.at(0), 0.25);
  EXPECT_EQ(s.at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.at(2), 0.25 + 0.75 * std::log(2.0) / std::log(4.0));
  EXPECT_EQ(s.at(5), 1.0);  // iteration 4 = W: warm-up over
  s.warmup_type = "linear";
  EXPECT_EQ(s.at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 0.25 + 0.75 * 2.0 / 4.0);
  s.warmup_steps = 1;  // DeepSpeed warms up over at least 2 iterations
  EXPECT_DOUBLE_EQ(s.at(2), 0.25 + 0.75 * 1.0 / 2.0);
  EXPECT_EQ(s.at(3), 1.0);
}

TEST(LrScheduleDeepSpeed, DecayEndsAtTheWarmupStartAndCosineAtItsFloor) {
  LrSchedule s;
  s.peak_lr = 2.0;
  s.warmup_steps = 2;
  s.total_steps = 10;
  s.type = "ds_warmup_decay";
  s.warmup_min_lr = 0.5;
  EXPECT_DOUBLE_EQ(s.at(3), 2.0);                      // iteration 2 = W
  EXPECT_DOUBLE_EQ(s.at(7), 0.5 + 1.5 * 4.0 / 8.0);    // iteration 6: (T - i) / (T - W)
  EXPECT_DOUBLE_EQ(s.at(11), 0.5);                     // iteration T
  EXPECT_DOUBLE_EQ(s.at(20), 0.5);
  s.type = "ds_warmup_cosine";
  s.cos_min_ratio = 0.1;
  s.warmup_min_ratio = 0.5;
  EXPECT_EQ(s.at(0), 0.0);  // DeepSpeed's WarmupCosineLR reports 0 before its first step
  EXPECT_DOUBLE_EQ(s.at(1), 1.0);  // iteration 0: warmup_min_ratio of the peak
  EXPECT_DOUBLE_EQ(s.at(6), 2.0 * (0.1 + 0.9 * 0.5));  // iteration 5: progress (5 - 2 + 1) / 8 = 0.5
  EXPECT_DOUBLE_EQ(s.at(30), 2.0 * 0.1);              // clamped past the end (DeepSpeed >= 0.19.3)
}

// Recipes choose DeepSpeed's schedules directly, with their keys; the keys need their schedule.
TEST(LrScheduleDeepSpeed, RecipesChooseThemWithTheirKeys) {
  const TrainConfig cfg = load_train_config(
      "", {"--lr_scheduler_type=ds_warmup_cosine", "--warmup_ratio=0.1", "--warmup_type=linear",
           "--warmup_min_ratio=0.2", "--cos_min_ratio=0.05", "--learning_rate=0.01"});
  const LrSchedule s{lr_schedule_config(cfg, 40)};
  EXPECT_EQ(s.warmup_steps, 4);
  EXPECT_DOUBLE_EQ(s.at(1), 0.01 * 0.2);
  EXPECT_DOUBLE_EQ(s.at(39), 0.01 * (0.05 + 0.95 * (1 + std::cos(M_PI * 35.0 / 36.0)) / 2));
  auto error_of = [](const std::vector<std::string>& flags) -> std::string {
    try {
      load_train_config("", flags);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_NE(error_of({"--lr_scheduler_type=ds_warmup"}).find("DeepSpeed's schedules need a warmup"),
            std::string::npos);
  EXPECT_NE(error_of({"--warmup_type=linear"}).find("warmup_type applies only to DeepSpeed's schedules"),
            std::string::npos);
  EXPECT_NE(error_of({"--lr_scheduler_type=ds_warmup_cosine", "--warmup_steps=3", "--warmup_min_lr=1e-5"})
                .find("warmup_min_lr applies only to lr_scheduler_type ds_warmup and ds_warmup_decay"),
            std::string::npos);
  EXPECT_NE(error_of({"--lr_scheduler_type=ds_warmup", "--warmup_steps=3", "--cos_min_ratio=0.1"})
                .find("apply only to lr_scheduler_type ds_warmup_cosine"),
            std::string::npos);
  EXPECT_EQ(error_of({"--lr_scheduler_type=ds_warmup_decay", "--warmup_steps=3", "--warmup_min_lr=1e-5"}),
            "(accepted)");
}

}  // namespace
}  // namespace shardft
