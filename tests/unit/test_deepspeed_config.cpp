// --deepspeed ds_config.json: the keys DeepSpeed users have set the recipe, "auto" defers to it,
// command-line overrides still win, and anything shardft does not implement is named in an error.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "config/train_config.hpp"

namespace shardft {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigDeepSpeed, Stage3WithZeroPlusPlusSetsTheRecipe) {
  const std::string ds = write("ds_zpp.json", R"({
    "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
    "gradient_clipping": 0.5, "bf16": {"enabled": true}, "fp16": {"enabled": false},
    "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2, "zero_quantized_weights": true,
                          "zero_quantized_gradients": true},
    "communication_data_type": "bf16", "steps_per_print": 25, "wall_clock_breakdown": false})");
  const TrainConfig cfg = load_train_config("", {"--gradient_accumulation_steps=3"}, ds);
  EXPECT_EQ(cfg.per_device_train_batch_size, 4);
  EXPECT_EQ(cfg.gradient_accumulation_steps, 3);  // "auto": the recipe (here the override) decides
  EXPECT_EQ(cfg.train_batch_size, 0);
  EXPECT_DOUBLE_EQ(cfg.max_grad_norm, 0.5);
  EXPECT_TRUE(cfg.bf16);
  EXPECT_EQ(cfg.zero_stage, 3);
  EXPECT_EQ(cfg.zero_hpz_partition_size, 2);
  EXPECT_TRUE(cfg.zero_quantized_weights);
  EXPECT_TRUE(cfg.zero_quantized_gradients);
  EXPECT_EQ(cfg.communication_data_type, "bf16");
  EXPECT_EQ(cfg.logging_steps, 25);
}

TEST(ConfigDeepSpeed, OverridesWinAndAStage2ConfigWorks) {
  const std::string ds = write("ds_z2.json", R"({"zero_optimization": {"stage": 2}, "train_batch_size": 32})");
  const TrainConfig cfg = load_train_config("", {"--zero_stage", "1"}, ds);
  EXPECT_EQ(cfg.zero_stage, 1);
  EXPECT_EQ(cfg.train_batch_size, 32);
  EXPECT_EQ(load_train_config("", {}, ds).zero_stage, 2);
}

TEST(ConfigDeepSpeed, EveryProblemIsNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"zero_optimization": {"stage": 3, "overlap_comm": true}})", "'zero_optimization.overlap_comm' is not supported"},
      {R"({"fp16": {"enabled": true}})", "'fp16.enabled' is not supported"},
      {R"({"optimizer": {"type": "AdamW"}})", "'optimizer' is not supported"},
      {R"({"zero_optimization": {"stage": "three"}})", "expects an integer"},
      {R"({"zero_optimization": {"stage": 5}})", "zero_optimization.stage"},
      {R"({"train_micro_batch_size_per_gpu": [1, 2]})", "expects a number, a boolean or \"auto\""},
      {R"({"zero_optimization": {"stage": 1, "zero_quantized_weights": true}})", "need zero_stage 3"},
      {"{ not json", "not valid JSON"},
      {"[1, 2]", "a DeepSpeed config is a JSON object"},
  };
  int i = 0;
  for (const auto& [text, want] : cases) {
    const std::string path = write("ds_bad" + std::to_string(i++) + ".json", text);
    try {
      load_train_config("", {}, path);
      ADD_FAILURE() << text << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "the message names the file: " << e.what();
    }
  }
  EXPECT_THROW(load_train_config("", {}, ::testing::TempDir() + "missing_ds.json"), ConfigError);
}

}  // namespace
}  // namespace shardft
