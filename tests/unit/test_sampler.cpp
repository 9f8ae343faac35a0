// The sampler's section of the recipe (data/sampler.hpp): resolved once from the recipe, and all the
// step plan reads; its errors name the training data as the recipe gave it.
#include <gtest/gtest.h>

#include <string>

#include "config/train_config.hpp"
#include "data/sampler.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

TEST(Sampler, SectionResolvesTheOrderSeedOnce) {
  TrainConfig cfg;
  cfg.seed = 7;
  EXPECT_EQ(sampler_section(cfg).order_seed, data_order_seed(cfg));
  cfg.data_seed = 11;
  EXPECT_EQ(sampler_section(cfg).order_seed, data_order_seed(cfg));
  EXPECT_NE(sampler_section(cfg).order_seed, [&] {
    TrainConfig other = cfg;
    other.data_seed = 12;
    return data_order_seed(other);
  }());
}

TEST(Sampler, PlanFromTheSection) {
  TrainConfig cfg;
  cfg.per_device_train_batch_size = 4;
  cfg.gradient_accumulation_steps = 2;
  cfg.num_train_epochs = 1.5;
  const StepPlan p = plan_steps(sampler_section(cfg), 100, 3);  // global batch 24
  EXPECT_EQ(p.samples_per_step, 24);
  EXPECT_EQ(p.steps_per_epoch, 4);
  EXPECT_EQ(p.total_steps, 6);
  cfg.max_steps = 9;
  EXPECT_EQ(plan_steps(sampler_section(cfg), 100, 3).total_steps, 9);
}

TEST(Sampler, TooLittleDataNamesTheDatasetOrTheMixture) {
  TrainConfig cfg;
  cfg.per_device_train_batch_size = 8;
  cfg.dataset_path = "train.jsonl";
  try {
    plan_steps(sampler_section(cfg), 5, 1);
    FAIL() << "5 samples made a step of 8";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("train.jsonl: 5 samples, fewer than one optimizer step needs", 0), 0u) << e.what();
  }
  cfg.datasets = "a.jsonl:0.5,b.jsonl:0.5";
  try {
    plan_steps(sampler_section(cfg), 5, 1);
    FAIL() << "5 samples made a step of 8";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("datasets a.jsonl:0.5,b.jsonl:0.5: 5 samples", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace shardft
