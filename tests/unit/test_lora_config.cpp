// The recipe's LoRA keys (PEFT's names): defaults as trl's, all-linear and lists resolved, bad values
// a ConfigError naming the key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/lora_config.hpp"
#include "config/train_config.hpp"

namespace shardft {
namespace {

TrainConfig with(const std::vector<std::string>& overrides) { return load_train_config("", overrides); }

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    with(overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LoraConfig, DefaultsAreTrlsAndPeftsLlamaTargets) {
  const LoraSpec s = lora_spec(with({"--use_peft=true"}));
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.r, 16);
  EXPECT_EQ(s.alpha, 32.0);
  EXPECT_EQ(s.dropout, 0.05);
  EXPECT_EQ(s.target_names(), (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_DOUBLE_EQ(s.scale(), 2.0);
  EXPECT_FALSE(lora_spec(with({})).enabled);
  EXPECT_TRUE(lora_spec(with({"--peft_type=lora"})).enabled);
}

TEST(LoraConfig, TargetsAndRsLoraScale) {
  const LoraSpec all = lora_spec(with({"--use_peft=true", "--lora_target_modules=all-linear"}));
  EXPECT_EQ(all.target_names().size(), 7u);
  const LoraSpec two =
      lora_spec(with({"--use_peft=true", "--lora_target_modules=k_proj,down_proj", "--use_rslora=true", "--lora_r=4"}));
  EXPECT_EQ(two.target_names(), (std::vector<std::string>{"k_proj", "down_proj"}));
  EXPECT_DOUBLE_EQ(two.scale(), 16.0);  // 32 / sqrt(4)
  EXPECT_EQ(canonical_lora_targets_text("[v_proj, q_proj]"), "[q_proj, v_proj]");
}

TEST(LoraConfig, BadValuesNameTheKey) {
  EXPECT_NE(error_of({"--lora_r=0"}).find("lora_r"), std::string::npos);
  EXPECT_NE(error_of({"--lora_dropout=1"}).find("lora_dropout"), std::string::npos);
  const std::string unknown = error_of({"--lora_target_modules=qkv_proj"});
  EXPECT_NE(unknown.find("lora_target_modules"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("gate_proj"), std::string::npos) << unknown;  // lists the valid ones
  const std::string bias = error_of({"--lora_bias=all"});
  EXPECT_NE(bias.find("lora_bias"), std::string::npos) << bias;
  EXPECT_NE(bias.find("none"), std::string::npos) << bias;
}

}  // namespace
}  // namespace shardft
