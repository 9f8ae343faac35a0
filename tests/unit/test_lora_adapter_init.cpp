// adapter_path / --adapter: a PEFT adapter's LoRA keys become the recipe's, its A and B the trainable
// parameters' starting values; a recipe key that contradicts the adapter is a ConfigError naming both.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/self_communicator.hpp"
#include "tests/common/peft_fixture_run.hpp"
#include "config/adapter_lora_keys.hpp"
#include "train/lora_adapter_init.hpp"

namespace shardft {
namespace {
using namespace testing_util;

const std::string kBase = "--model_name_or_path=" + hf_fixture_dir() + "/tiny_llama";
const std::string kAdapter = peft_fixture_dir("llama_rslora_qv") + "/adapter_init";  // r 4, alpha 8, rsLoRA, q/v

std::string config_error(const std::vector<std::string>& flags) {
  try {
    with_adapter_lora_keys(load_train_config("", flags));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LoraAdapterInit, TakesTheAdaptersKeysAndFactors) {
  const TrainConfig cfg = with_adapter_lora_keys(load_train_config("", {kBase, "--adapter", kAdapter}));
  EXPECT_TRUE(cfg.use_peft);
  EXPECT_EQ(cfg.lora_r, 4);
  EXPECT_DOUBLE_EQ(cfg.lora_alpha, 8.0);
  EXPECT_TRUE(cfg.use_rslora);
  EXPECT_DOUBLE_EQ(cfg.lora_dropout, 0.0);  // the adapter's, over the recipe default 0.05
  EXPECT_EQ(cfg.lora_target_modules, "[q_proj, v_proj]");

  Trainer tr(load_train_config("", {kBase, "--adapter=" + kAdapter}), 1, self());
  const std::vector<float> w = tr.engine().gather_master();
  EXPECT_EQ(worst_factor_error(tr.model().layout(), w, peft_adapter_tensors(kAdapter)), 0.0);
}

TEST(LoraAdapterInit, ARecipeKeyThatContradictsTheAdapterIsAConfigError) {
  const std::string r = config_error({kBase, "--adapter", kAdapter, "--lora_r=16"});
  EXPECT_NE(r.find("--lora_r: lora_r is 16 but the adapter"), std::string::npos) << r;
  EXPECT_NE(r.find("has 4"), std::string::npos) << r;
  const std::string t = config_error({kBase, "--adapter", kAdapter, "--lora_target_modules=all-linear"});
  EXPECT_NE(t.find("targets [q_proj, v_proj]"), std::string::npos) << t;
  EXPECT_NE(config_error({kBase, "--adapter", kAdapter, "--use_rslora=false"}).find("use_rslora"), std::string::npos);
  // Set, but to the adapter's value: fine.
  EXPECT_EQ(config_error({kBase, "--adapter", kAdapter, "--lora_r=4", "--lora_alpha=8"}), "");
  // Dropout is a training choice, not part of the adapter's function: the recipe's value wins.
  const TrainConfig d = with_adapter_lora_keys(load_train_config("", {kBase, "--adapter", kAdapter, "--lora_dropout=0.1"}));
  EXPECT_DOUBLE_EQ(d.lora_dropout, 0.1);
}

// trl's default lora_dropout (0.05, the recipe default) trains: with B = 0 the first step's loss is the
// base's (the base reads x undropped) but B's first update reads the dropped input, so the second differs.
TEST(LoraAdapterInit, TheDefaultDropoutTrains) {
  const TokenBatch batch = peft_fixture_batch("llama_all_linear");
  std::vector<double> losses[2];  // without dropout, with the default
  for (int with = 0; with < 2; ++with) {
    std::vector<std::string> flags = {kBase, "--use_peft", "--learning_rate=1e-2"};
    if (with == 0) flags.push_back("--lora_dropout=0");
    Trainer tr(load_train_config("", flags), 1, self());
    for (int s = 0; s < 2; ++s) losses[with].push_back(tr.step({batch}).loss);
  }
  EXPECT_EQ(losses[0][0], losses[1][0]);
  EXPECT_NE(losses[0][1], losses[1][1]);
  EXPECT_TRUE(std::isfinite(losses[1][1]));
}

}  // namespace
}  // namespace shardft
