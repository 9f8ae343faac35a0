// The schedules lr_scheduler_kwargs configures, as HF defines them: every case of
// tests/reference/hf_lr_schedules.json (make_hf_lr.py, from transformers' own schedule functions) given as
// a recipe's flags must give transformers' factor at every optimizer step to 1e-12; the newer
// warmup_stable_decay shapes (warmup_type, decay_type, min_lr_ratio during the warm-up) by their formulas;
// and which kwargs a schedule takes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/lr_scheduler_kwargs.hpp"
#include "config/train_config.hpp"
#include "train/lr_schedule.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

std::string error_of(const std::vector<std::string>& flags) {
  try {
    load_train_config("", flags);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(LrScheduleKwargs, EveryStepMatchesTransformers) {
  std::ifstream in(SHARDFT_REFERENCE_DIR "/hf_lr_schedules.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json cases = nlohmann::json::parse(in).at("cases");
  ASSERT_EQ(cases.size(), 5u);
  for (const nlohmann::json& c : cases) {
    const std::string type = c.at("type");
    SCOPED_TRACE(type + " " + c.at("kwargs").dump());
    const TrainConfig cfg = load_train_config(
        "", {"--lr_scheduler_type=" + type, "--lr_scheduler_kwargs=" + c.at("kwargs").dump(),
             "--warmup_steps=" + std::to_string(c.at("warmup").get<int>()), "--learning_rate=1.0"});
    const long total = c.at("total");
    const LrSchedule s{lr_schedule_config(cfg, total)};
    const std::vector<double> want = c.at("factors");
    for (long step = c.value("from_step", 0L); step < total; ++step) {
      EXPECT_NEAR(s.at(step), want[step], 1e-12) << "step " << step;
    }
  }
}

TEST(LrScheduleKwargs, WarmupStableDecayShapes) {
  LrSchedule s;
  s.type = "warmup_stable_decay";
  s.peak_lr = 2.0;
  s.warmup_steps = 10;
  s.stable_steps = 5;
  s.decay_steps = 20;
  s.min_lr_ratio = 0.1;
  s.wsd_warmup = "cosine";
  s.wsd_decay = "1-sqrt";
  s.total_steps = 40;
  EXPECT_DOUBLE_EQ(s.at(0), 2.0 * 0.1);  // the warm-up starts at min_lr_ratio
  EXPECT_DOUBLE_EQ(s.at(4), 2.0 * (0.5 * (1 - std::cos(M_PI * 0.4)) * 0.9 + 0.1));
  EXPECT_DOUBLE_EQ(s.at(12), 2.0);
  EXPECT_DOUBLE_EQ(s.at(20), 2.0 * ((1 - std::sqrt(0.25)) * 0.9 + 0.1));
  EXPECT_DOUBLE_EQ(s.at(36), 2.0 * 0.1);  // after the decay
  s.wsd_warmup = "1-sqrt";
  s.wsd_decay = "linear";
  EXPECT_DOUBLE_EQ(s.at(4), 2.0 * ((1 - std::sqrt(0.6)) * 0.9 + 0.1));
  EXPECT_DOUBLE_EQ(s.at(20), 2.0 * (0.75 * 0.9 + 0.1));
  // num_stable_steps unset: what the warm-up and the decay leave of the run.
  const TrainConfig cfg = load_train_config("", {"--lr_scheduler_type=warmup_stable_decay", "--warmup_steps=10",
                                                 "--lr_scheduler_kwargs={num_decay_steps: 20, decay_type: linear}"});
  EXPECT_EQ(lr_schedule_config(cfg, 100).stable_steps, 70);
  EXPECT_THROW(lr_schedule_config(cfg, 25), ConfigError);
}

TEST(LrScheduleKwargs, EachScheduleTakesItsOwn) {
  EXPECT_NE(error_of({"--lr_scheduler_type=linear", "--lr_scheduler_kwargs={num_cycles: 2}"})
                .find("lr_scheduler_type linear takes no lr_scheduler_kwargs; 'num_cycles' does not apply to it"),
            std::string::npos);
  EXPECT_NE(error_of({"--lr_scheduler_type=warmup_stable_decay"}).find("needs lr_scheduler_kwargs {num_decay_steps: N}"),
            std::string::npos);
  EXPECT_NE(error_of({"--lr_scheduler_type=cosine_with_restarts", "--lr_scheduler_kwargs={num_cycles: 1.5}"})
                .find("a whole number"),
            std::string::npos);
  EXPECT_NE(error_of({"--lr_scheduler_kwargs={num_cycle: 2}"}).find("unknown setting 'num_cycle'"), std::string::npos);
  EXPECT_NE(error_of({"--lr_scheduler_type=cosine_with_min_lr", "--min_lr=1e-5", "--lr_scheduler_kwargs={min_lr: 1e-5}"})
                .find("given twice"),
            std::string::npos);
  const TrainConfig floor = load_train_config(
      "", {"--lr_scheduler_type=cosine_with_min_lr", "--lr_scheduler_kwargs={min_lr_rate: 0.1}", "--learning_rate=1"});
  EXPECT_DOUBLE_EQ(LrSchedule{lr_schedule_config(floor, 10)}.at(9), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.9)));
  EXPECT_EQ(canonical_lr_scheduler_kwargs_text("{num_decay_steps: 20, min_lr_ratio: 0.1}"),
            "{\"min_lr_ratio\": 0.1, \"num_decay_steps\": 20}");
}

}  // namespace
}  // namespace shardft
