// --deepspeed ds_config.json: the keys DeepSpeed users have set the recipe, "auto" defers to it,
// command-line overrides still win, keys that only tune DeepSpeed's own implementation are accepted and
// explained, and anything shardft does not implement is an error naming the file and the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "config/deepspeed_json.hpp"
#include "config/recipe_schema.hpp"
#include "config/train_config.hpp"
#include "config/zero_buckets.hpp"

namespace shardft {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

std::string text_of(const TrainConfig& cfg, const std::string& key) {
  const RecipeKey* k = find_recipe_key(key);
  EXPECT_NE(k, nullptr) << key;
  return k ? value_text(cfg, *k) : "";
}

std::string error_of(const std::string& ds, const std::vector<std::string>& overrides = {},
                     const std::string& recipe = "") {
  try {
    load_train_config(recipe, overrides, ds);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(accepted)";
}

const std::string kSourceDir = SHARDFT_REFERENCE_DIR "/../..";

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
  // steps_per_print is DeepSpeed's own progress line, as under HF's Trainer: logging_steps stays the recipe's.
  EXPECT_EQ(cfg.logging_steps, TrainConfig{}.logging_steps);
}

TEST(ConfigDeepSpeed, OverridesWinAndAStage2ConfigWorks) {
  const std::string ds = write("ds_z2.json", R"({"zero_optimization": {"stage": 2}, "train_batch_size": 32})");
  const TrainConfig cfg = load_train_config("", {"--zero_stage", "1"}, ds);
  EXPECT_EQ(cfg.zero_stage, 1);
  EXPECT_EQ(cfg.train_batch_size, 32);
  EXPECT_EQ(load_train_config("", {}, ds).zero_stage, 2);
}

// Each honored key sets exactly what the same value given as --recipe_key would, and names its origin.
TEST(ConfigDeepSpeed, EachHonoredKeyMapsToItsRecipeKey) {
  struct Case {
    std::string json, ds_key, recipe_key, value;
    std::vector<std::string> companions;
  };
  const std::vector<Case> cases = {
      {R"({"train_micro_batch_size_per_gpu": 4})",
       "train_micro_batch_size_per_gpu",
       "per_device_train_batch_size",
       "4",
       {}},
      {R"({"gradient_accumulation_steps": 3})", "gradient_accumulation_steps", "gradient_accumulation_steps", "3", {}},
      {R"({"train_batch_size": 24})", "train_batch_size", "train_batch_size", "24", {}},
      {R"({"gradient_clipping": 0.25})", "gradient_clipping", "max_grad_norm", "0.25", {}},
      {R"({"bf16": {"enabled": true}})", "bf16.enabled", "bf16", "true", {}},
      {R"({"communication_data_type": "bf16"})", "communication_data_type", "communication_data_type", "bf16", {}},
      {R"({"zero_optimization": {"stage": 2}})", "zero_optimization.stage", "zero_stage", "2", {}},
      {R"({"zero_optimization": {"zero_hpz_partition_size": 4}})",
       "zero_optimization.zero_hpz_partition_size",
       "zero_hpz_partition_size",
       "4",
       {"--zero_stage=3"}},
      {R"({"zero_optimization": {"zero_quantized_weights": true}})",
       "zero_optimization.zero_quantized_weights",
       "zero_quantized_weights",
       "true",
       {"--zero_stage=3"}},
      {R"({"zero_optimization": {"zero_quantized_gradients": true}})",
       "zero_optimization.zero_quantized_gradients",
       "zero_quantized_gradients",
       "true",
       {"--zero_stage=2"}},
      {R"({"zero_optimization": {"reduce_bucket_size": 5e8}})",
       "zero_optimization.reduce_bucket_size",
       "reduce_bucket_size",
       "500000000",
       {}},
      {R"({"zero_optimization": {"allgather_bucket_size": 200000000}})",
       "zero_optimization.allgather_bucket_size",
       "allgather_bucket_size",
       "200000000",
       {}},
      {R"({"zero_optimization": {"overlap_comm": false}})", "zero_optimization.overlap_comm", "overlap_comm", "false",
       {}},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": 2e-5}}})",
       "optimizer.params.lr",
       "learning_rate",
       "2e-5",
       {}},
      {R"({"optimizer": {"type": "AdamW", "params": {"eps": 1e-6}}})",
       "optimizer.params.eps",
       "adam_epsilon",
       "1e-6",
       {}},
      {R"({"optimizer": {"type": "Adam", "params": {"weight_decay": 0.1}}})",
       "optimizer.params.weight_decay",
       "weight_decay",
       "0.1",
       {}},
      {R"({"optimizer": {"type": "adamw", "params": {"betas": [0.8, 0.95]}}})",
       "optimizer.params.betas[0]",
       "adam_beta1",
       "0.8",
       {}},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.8, 0.95]}}})",
       "optimizer.params.betas[1]",
       "adam_beta2",
       "0.95",
       {}},
      // The scheduler block: the flags make `want` valid alone; they win in `got` as well.
      {R"({"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 50}}})",
       "scheduler.type",
       "lr_scheduler_type",
       "ds_warmup_decay",
       {"--warmup_steps=3"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-6}}})",
       "scheduler.params.warmup_min_lr",
       "warmup_min_lr",
       "1e-6",
       {"--lr_scheduler_type=ds_warmup", "--warmup_steps=3"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 2e-5}}})",
       "scheduler.params.warmup_max_lr",
       "learning_rate",
       "2e-5",
       {}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 25}}})",
       "scheduler.params.warmup_num_steps",
       "warmup_steps",
       "25",
       {"--lr_scheduler_type=ds_warmup"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear"}}})",
       "scheduler.params.warmup_type",
       "warmup_type",
       "linear",
       {"--lr_scheduler_type=ds_warmup", "--warmup_steps=3"}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 40}}})",
       "scheduler.params.total_num_steps",
       "max_steps",
       "40",
       {}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": "auto", "warmup_min_ratio": 0.1}}})",
       "scheduler.params.warmup_min_ratio",
       "warmup_min_ratio",
       "0.1",
       {"--lr_scheduler_type=ds_warmup_cosine", "--warmup_steps=3"}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": "auto", "cos_min_ratio": 0.01}}})",
       "scheduler.params.cos_min_ratio",
       "cos_min_ratio",
       "0.01",
       {"--lr_scheduler_type=ds_warmup_cosine", "--warmup_steps=3"}},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.json);
    const std::string path = write("ds_map" + std::to_string(i++) + ".json", c.json);
    const TrainConfig got = load_train_config("", c.companions, path);
    std::vector<std::string> flags = c.companions;
    flags.push_back("--" + c.recipe_key + "=" + c.value);
    const TrainConfig want = load_train_config("", flags);
    EXPECT_EQ(text_of(got, c.recipe_key), text_of(want, c.recipe_key));
    EXPECT_NE(text_of(got, c.recipe_key), text_of(TrainConfig{}, c.recipe_key)) << "the case must change the default";
    EXPECT_EQ(source_of(got, c.recipe_key), path + ": " + c.ds_key);
  }
}

// "auto" everywhere: the recipe's values stay, as HF's Trainer fills "auto" from TrainingArguments.
TEST(ConfigDeepSpeed, AutoKeepsTheRecipesValues) {
  const std::string recipe =
      write("ds_auto_recipe.yaml",
            "per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\nmax_grad_norm: 0.3\n"
            "bf16: true\nlearning_rate: 1.0e-04\nadam_beta1: 0.85\nadam_beta2: 0.97\n"
            "adam_epsilon: 1.0e-07\nweight_decay: 0.05\nzero_stage: 3\n"
            "communication_data_type: bf16\nreduce_bucket_size: 1000\n");
  const std::string ds = write("ds_auto.json", R"({
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
    "gradient_clipping": "auto", "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
    "communication_data_type": "auto", "steps_per_print": "auto", "wall_clock_breakdown": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "zero_optimization": {"stage": "auto", "reduce_bucket_size": "auto", "allgather_bucket_size": "auto",
                          "overlap_comm": "auto", "stage3_prefetch_bucket_size": "auto",
                          "stage3_param_persistence_threshold": "auto"}})");
  const TrainConfig from_recipe = load_train_config(recipe, {});
  const TrainConfig cfg = load_train_config(recipe, {}, ds);
  for (const RecipeKey& key : recipe_keys()) {
    EXPECT_EQ(value_text(cfg, key), value_text(from_recipe, key)) << key.name;
    EXPECT_EQ(source_of(cfg, key.name), source_of(from_recipe, key.name)) << key.name;
  }
  EXPECT_EQ(resolved_reduce_bucket_size(cfg), 1000);
  EXPECT_EQ(resolved_allgather_bucket_size(cfg), 500000000);
}

TEST(ConfigDeepSpeed, TheReportResolvesAutoAndSaysWhatShardftDoesInstead) {
  const std::string recipe = write("ds_report_recipe.yaml", "per_device_train_batch_size: 4\nhidden_size: 96\n");
  const std::string ds_path = write("ds_report.json", R"({
    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2, "train_batch_size": "auto",
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": [0.9, 0.95]}},
    "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto", "overlap_comm": true,
                          "offload_optimizer": {"device": "none", "pin_memory": true}}})");
  const TrainConfig cfg = load_train_config(recipe, {"--zero_stage=1"}, ds_path);
  const DeepSpeedConfig ds = read_deepspeed_config(ds_path);
  const std::string report = describe_deepspeed_config(ds, cfg, 2);
  for (
      const std::string& want : std::vector<std::string>{
          "DeepSpeed config " + ds_path + ": 8 keys map to recipe keys, 3 are accepted as they are or without effect\n",
          "  train_micro_batch_size_per_gpu = auto -> per_device_train_batch_size = 4 (auto: " + recipe + ":1)\n",
          "  gradient_accumulation_steps = 2 -> gradient_accumulation_steps = 2\n",
          "  train_batch_size = auto -> train_batch_size = 16 (4 per device x 2 accumulation x 2 ranks) (auto: "
          "default)",
          "  optimizer.type = AdamW: as shardft",
          "  optimizer.params.lr = auto -> learning_rate = 0.003 (auto: default)\n",
          "  optimizer.params.betas = [0.9,0.95] -> adam_beta1 = 0.9, adam_beta2 = 0.95\n",
          "  zero_optimization.stage = 2 -> zero_stage = 1 (--zero_stage wins)\n",
          "  zero_optimization.reduce_bucket_size = auto -> reduce_bucket_size = auto (9216 elements) (auto: default)\n",
          "  zero_optimization.overlap_comm = true -> overlap_comm = true\n",
          "  zero_optimization.offload_optimizer.device = none: as shardft",
          "  zero_optimization.offload_optimizer.pin_memory = true: no effect",
      }) {
    EXPECT_NE(report.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << report;
  }
}

// The keys that only tune DeepSpeed's implementation: accepted, recipe untouched, each explained.
TEST(ConfigDeepSpeed, KeysWithoutEffectAreAcceptedAndExplained) {
  const std::string ds_path = write("ds_noop.json", R"({
    "steps_per_print": 2000, "wall_clock_breakdown": false, "zero_allow_untested_optimizer": true,
    "fp16": {"auto_cast": false, "fp16_master_weights_and_grads": false},
    "tensorboard": {"enabled": false, "output_path": "tb/"},
    "optimizer": {"type": "Adam", "params": {"adam_w_mode": true, "torch_adam": false}},
    "zero_optimization": {
      "contiguous_gradients": true, "reduce_scatter": false, "allgather_partitions": true,
      "round_robin_gradients": true, "sub_group_size": 1e9, "stage3_prefetch_bucket_size": 5e8,
      "stage3_param_persistence_threshold": 1e6, "stage3_max_live_parameters": 1e9,
      "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": true,
      "offload_optimizer": {"device": "none", "pin_memory": true, "buffer_count": 4, "fast_init": false},
      "offload_param": {"device": "none", "nvme_path": "/local_nvme", "buffer_size": 1e8, "max_in_cpu": 1e9}}})");
  const TrainConfig cfg = load_train_config("", {}, ds_path);
  const TrainConfig defaults = load_train_config("", {});
  for (const RecipeKey& key : recipe_keys()) EXPECT_EQ(value_text(cfg, key), value_text(defaults, key)) << key.name;
  const DeepSpeedConfig ds = read_deepspeed_config(ds_path);
  EXPECT_TRUE(ds.settings.empty());
  EXPECT_EQ(ds.entries.size(), 27u);
  for (const DeepSpeedEntry& e : ds.entries) {
    EXPECT_TRUE(e.recipe_keys.empty()) << e.ds_key;
    EXPECT_FALSE(e.note.empty()) << e.ds_key << " is accepted without saying what shardft does";
  }
  const std::string report = describe_deepspeed_config(ds, cfg, 1);
  EXPECT_NE(report.find("zero_optimization.contiguous_gradients = true: no effect: shardft's gradients always live "
                        "in contiguous flat buffers"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("tensorboard = {\"enabled\": false, ...}: no effect: disabled"), std::string::npos) << report;
}

// DeepSpeed's TensorBoard monitor writes output_path/job_name; without an output_path shardft keeps its
// folder under output_dir, named by the job.
TEST(ConfigDeepSpeed, TheTensorBoardSectionTurnsOnTheEventFiles) {
  const TrainConfig in_path = load_train_config(
      "", {}, write("ds_tb.json", R"({"tensorboard": {"enabled": true, "output_path": "tb", "job_name": "sft"}})"));
  EXPECT_EQ(in_path.report_to, "tensorboard");
  EXPECT_EQ(in_path.logging_dir, "tb/sft");
  EXPECT_EQ(in_path.run_name, "");
  EXPECT_NE(source_of(in_path, "logging_dir").find("tensorboard.output_path"), std::string::npos);
  const TrainConfig named = load_train_config("", {}, write("ds_tb2.json", R"({"tensorboard": {"enabled": true}})"));
  EXPECT_EQ(named.report_to, "tensorboard");
  EXPECT_EQ(named.logging_dir, "");
  EXPECT_EQ(named.run_name, "DeepSpeedJobName");  // DeepSpeed's default job name
}

TEST(ConfigDeepSpeed, AdamWithL2IsAcceptedOnlyWithoutWeightDecay) {
  const std::string l2 = write("ds_l2.json", R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})");
  EXPECT_EQ(error_of(l2), "(accepted)");  // weight_decay 0: Adam and AdamW take the same step
  const std::string msg = error_of(l2, {"--weight_decay=0.1"});
  EXPECT_NE(msg.find(l2 + ": DeepSpeed key 'optimizer.params.adam_w_mode' false"), std::string::npos) << msg;
  EXPECT_NE(msg.find("weight_decay 0.1"), std::string::npos) << msg;
  // AdamW stays AdamW whatever adam_w_mode says (DeepSpeed: name AdamW or adam_w_mode).
  const std::string adamw = write(
      "ds_l2w.json", R"({"optimizer": {"type": "AdamW", "params": {"adam_w_mode": false, "weight_decay": 0.1}}})");
  EXPECT_EQ(error_of(adamw), "(accepted)");
}

TEST(ConfigDeepSpeed, EveryRejectedKeyIsNamedWithTheReason) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {R"({"fp16": {"enabled": true, "auto_cast": true}})",
       {"DeepSpeed key 'fp16.auto_cast' is not supported by shardft", "shardft's only inputs are token ids"}},
      {R"({"fp16": {"enabled": true, "fp16_master_weights_and_grads": true}})",
       {"DeepSpeed key 'fp16.fp16_master_weights_and_grads' is not supported", "AdamW state in fp32"}},
      {R"({"fp16": {"enabled": false, "loss_scale_power": 3}})",
       {"DeepSpeed key 'fp16.loss_scale_power' is not supported", "fp16 keys enabled, loss_scale"}},
      {R"({"fp16": {"enabled": "yes"}})", {"DeepSpeed key 'fp16.enabled' expects true, false or \"auto\""}},
      {R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}}})",
       {"DeepSpeed key 'zero_optimization.offload_optimizer.device' is not supported",
        "offloading optimizer state to cpu is not implemented", "\"device\": \"none\""}},
      {R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/nvme"}}})",
       {"DeepSpeed key 'zero_optimization.offload_param.device' is not supported", "offloading weights to nvme"}},
      {R"({"zero_optimization": {"offload_param": {"device": "gpu"}}})", {"device 'gpu' is none of"}},
      {R"({"zero_optimization": {"offload_param": {"device": "none", "spill": 1}}})",
       {"DeepSpeed key 'zero_optimization.offload_param.spill' is not supported"}},
      {R"({"scheduler": {"type": "OneCycle", "params": {"cycle_max_lr": 0.01}}})",
       {"DeepSpeed key 'scheduler.type' is not supported", "'OneCycle' is not implemented",
        "WarmupLR, WarmupDecayLR and WarmupCosineLR", "recipe's lr_scheduler_type"}},
      {R"({"scheduler": {"type": "LRRangeTest"}})", {"DeepSpeed key 'scheduler.type'", "'LRRangeTest' is not"}},
      {R"({"scheduler": {"type": "warmuplr"}})", {"'warmuplr' is not implemented"}},  // DeepSpeed matches case too
      {R"({"scheduler": {"params": {"warmup_num_steps": 10}}})", {"DeepSpeed key 'scheduler.type'", "missing"}},
      {R"({"scheduler": "WarmupLR"})", {"DeepSpeed key 'scheduler' expects an object"}},
      {R"({"scheduler": {"type": "WarmupLR", "mode": "x"}})",
       {"DeepSpeed key 'scheduler.mode' is not supported", "scheduler keys type, params"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 100}}})",
       {"DeepSpeed key 'scheduler.params.total_num_steps' is not supported",
        "DeepSpeed's WarmupLR takes no such parameter; it takes warmup_min_lr, warmup_max_lr, warmup_num_steps, "
        "warmup_type, last_batch_iteration"}},
      {R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 9, "warmup_max_lr": 0.1}}})",
       {"DeepSpeed key 'scheduler.params.warmup_max_lr' is not supported", "WarmupCosineLR takes no such"}},
      {R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_max_lr": "auto"}}})",
       {"DeepSpeed key 'scheduler.params.total_num_steps' is not supported", "requires it",
        "\"auto\" for the run's steps"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}})",
       {"DeepSpeed key 'scheduler.params.warmup_num_steps' is not supported", "positive whole number"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10.5}}})",
       {"'scheduler.params.warmup_num_steps'", "ValueError for 10.5"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "exp"}}})",
       {"DeepSpeed key 'scheduler.params.warmup_type' is not supported", "neither \"log\" nor \"linear\""}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"last_batch_iteration": 20}}})",
       {"DeepSpeed key 'scheduler.params.last_batch_iteration' is not supported", "only -1"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": [0, 0.1]}}})",
       {"DeepSpeed key 'scheduler.params.warmup_min_lr' expects a number or \"auto\""}},
      {R"({"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 0}}})",
       {"DeepSpeed key 'scheduler.params.total_num_steps' expects a whole number >= 1"}},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}}})",
       {"scheduler.type: DeepSpeed's schedules need a warmup", "warmup_steps = 0 (default)"}},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": 2e-5}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-5}}})",
       {"DeepSpeed keys 'optimizer.params.lr' (2e-05) and 'scheduler.params.warmup_max_lr' (3e-05) both set "
        "learning_rate and disagree"}},
      {R"({"optimizer": {"type": "Lamb", "params": {"lr": 0.001}}})",
       {"DeepSpeed key 'optimizer.type' is not supported", "'Lamb' is not implemented; shardft's optimizer is AdamW"}},
      {R"({"optimizer": {"params": {"lr": 0.001}}})", {"DeepSpeed key 'optimizer.type' is not supported", "missing"}},
      {R"({"optimizer": {"type": "AdamW", "params": {"amsgrad": true}}})",
       {"DeepSpeed key 'optimizer.params.amsgrad' is not supported", "lr, betas, eps, weight_decay"}},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})",
       {"DeepSpeed key 'optimizer.params.betas' expects [beta1, beta2] or \"auto\""}},
      {R"({"optimizer": {"type": "AdamW", "legacy_fusion": false}})",
       {"DeepSpeed key 'optimizer.legacy_fusion' is not supported"}},
      {R"({"wall_clock_breakdown": true})", {"DeepSpeed key 'wall_clock_breakdown' is not supported", "set it false"}},
      {R"({"activation_checkpointing": {"partition_activations": true}})",
       {"DeepSpeed key 'activation_checkpointing' is not supported by shardft: shardft does not implement it; it reads "
        "these keys: train_micro_batch_size_per_gpu"}},
      {R"({"tensorboard": {"enabled": true, "flush_secs": 5}})",
       {"DeepSpeed key 'tensorboard.flush_secs' is not supported", "tensorboard keys enabled, output_path, job_name"}},
      {R"({"tensorboard": {"enabled": true, "output_path": 3}})", {"DeepSpeed key 'tensorboard.output_path' expects a string"}},
      {R"({"wandb": {"enabled": true}})", {"DeepSpeed key 'wandb' is not supported"}},
      {R"({"zero_optimization": {"stage": 3, "mics_shard_size": 8}})",
       {"DeepSpeed key 'zero_optimization.mics_shard_size' is not supported",
        "it reads zero_optimization keys stage, zero_hpz_partition_size"}},
      {R"({"bf16": {"enabled": true, "immediate_grad_update": true}})", {"DeepSpeed key 'bf16.immediate_grad_update'"}},
      {R"({"zero_optimization": {"stage": 3, "contiguous_gradients": "yes"}})",
       {"DeepSpeed key 'zero_optimization.contiguous_gradients' expects true, false or \"auto\", got \"yes\""}},
      {R"({"zero_optimization": {"stage3_max_live_parameters": true}})",
       {"DeepSpeed key 'zero_optimization.stage3_max_live_parameters' expects a number or \"auto\""}},
      {R"({"zero_optimization": true})", {"DeepSpeed key 'zero_optimization' expects an object"}},
      {R"({"zero_optimization": {"reduce_bucket_size": 1.5}})",
       {"key 'reduce_bucket_size' expects \"auto\" or a whole number"}},
      {R"({"zero_optimization": {"stage": "three"}})", {"expects an integer"}},
      {R"({"zero_optimization": {"stage": 5}})", {"zero_optimization.stage"}},
      {R"({"communication_data_type": "fp16"})", {"communication_data_type", "must be one of fp32, bf16"}},
      {R"({"train_micro_batch_size_per_gpu": [1, 2]})", {"expects a number, a boolean or \"auto\""}},
      {R"({"zero_optimization": {"stage": 1, "zero_quantized_weights": true}})", {"need zero_stage 3"}},
      {"{ not json", {"not valid JSON"}},
      {R"({"gradient_clipping": 1e400})", {"not valid JSON", "number overflow parsing '1e400'"}},  // as found by fuzzing in datasets
      {"[1, 2]", {"a DeepSpeed config is a JSON object"}},
  };
  int i = 0;
  for (const auto& [text, wants] : cases) {
    SCOPED_TRACE(text);
    const std::string path = write("ds_bad" + std::to_string(i++) + ".json", text);
    const std::string msg = error_of(path);
    for (const std::string& want : wants) EXPECT_NE(msg.find(want), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind(path, 0), 0u) << "the message starts with the file: " << msg;
  }
  EXPECT_THROW(load_train_config("", {}, ::testing::TempDir() + "missing_ds.json"), ConfigError);
}

// HF's docs' block, every param "auto": the recipe's learning rate, warm-up and run length drive it.
TEST(ConfigDeepSpeed, SchedulerAutoTakesTheRecipesValues) {
  const std::string recipe = write("ds_sched_recipe.yaml",
                                   "learning_rate: 1.0e-04\nwarmup_ratio: 0.1\nmax_steps: 50\nlr_scheduler_type: cosine\n");
  const std::string ds_path = write("ds_sched_auto.json", R"({
    "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                  "warmup_num_steps": "auto", "total_num_steps": "auto", "last_batch_iteration": -1}}})");
  const TrainConfig cfg = load_train_config(recipe, {}, ds_path);
  EXPECT_EQ(cfg.lr_scheduler_type, "ds_warmup_decay");  // the block replaces the recipe's schedule, as in HF
  EXPECT_EQ(source_of(cfg, "lr_scheduler_type"), ds_path + ": scheduler.type");
  EXPECT_DOUBLE_EQ(cfg.learning_rate, 1e-4);
  EXPECT_EQ(source_of(cfg, "learning_rate"), recipe + ":1");
  EXPECT_DOUBLE_EQ(cfg.warmup_ratio, 0.1);
  EXPECT_EQ(cfg.warmup_steps, 0);
  EXPECT_EQ(cfg.max_steps, 50);
  EXPECT_EQ(cfg.warmup_min_lr, 0.0);
  EXPECT_EQ(cfg.warmup_type, "log");  // left out: DeepSpeed's default
  EXPECT_EQ(source_of(cfg, "warmup_type"),
            ds_path + ": scheduler.params.warmup_type (not in the file: DeepSpeed's default)");
  const std::string report = describe_deepspeed_config(read_deepspeed_config(ds_path), cfg, 1);
  for (const std::string& want : std::vector<std::string>{
           "  scheduler.type = WarmupDecayLR -> lr_scheduler_type = ds_warmup_decay; DeepSpeed's WarmupDecayLR as its "
           "engine steps it: the first step at warmup_min_lr",
           "  scheduler.params.warmup_max_lr = auto -> learning_rate = 0.0001 (auto: " + recipe + ":1)\n",
           "  scheduler.params.warmup_num_steps = auto -> warmup_steps = 0, warmup_ratio = 0.1 (auto: default); "
           "warmup_steps, or warmup_ratio of the run's steps",
           "  scheduler.params.total_num_steps = auto -> max_steps = 50, num_train_epochs = 3.0 (auto: " + recipe +
               ":3); the run's optimizer steps\n",
           "  scheduler.params.last_batch_iteration = -1: as shardft",
           "  scheduler.params.warmup_type = log -> warmup_type = log; not in the file: DeepSpeed's default\n",
       }) {
    EXPECT_NE(report.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << report;
  }
}

// A param the block leaves out is DeepSpeed's default, as DeepSpeed would run it; flags still win.
TEST(ConfigDeepSpeed, SchedulerParamsLeftOutTakeDeepSpeedsDefaults) {
  const std::string decay = write("ds_sched_decay.json", R"({"scheduler": {"type": "WarmupDecayLR",
                                                             "params": {"total_num_steps": 100}}})");
  const TrainConfig cfg = load_train_config("", {}, decay);
  EXPECT_DOUBLE_EQ(cfg.learning_rate, 0.001);  // WarmupDecayLR's own warmup_max_lr default
  EXPECT_EQ(cfg.warmup_steps, 1000);
  EXPECT_EQ(cfg.max_steps, 100);
  EXPECT_EQ(load_train_config("", {"--warmup_steps=10"}, decay).warmup_steps, 10);
  // WarmupLR's warmup_max_lr defaults to the optimizer's lr (DeepSpeed >= 0.19): the recipe's.
  const std::string warmup = write("ds_sched_warmup.json", R"({"scheduler": {"type": "WarmupLR"}})");
  EXPECT_DOUBLE_EQ(load_train_config("", {"--learning_rate=5e-4"}, warmup).learning_rate, 5e-4);
  // The same learning rate written twice is one value.
  const std::string twice = write("ds_sched_twice.json", R"({"optimizer": {"type": "AdamW", "params": {"lr": 2e-5}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.00002}}})");
  EXPECT_DOUBLE_EQ(load_train_config("", {}, twice).learning_rate, 2e-5);
}

TEST(ConfigDeepSpeed, BucketSizesAcceptAutoAndDeepSpeedsNumbers) {
  EXPECT_EQ(canonical_bucket_size_text("auto"), "auto");
  EXPECT_EQ(canonical_bucket_size_text("5e8"), "500000000");
  EXPECT_EQ(canonical_bucket_size_text("200000000.0"), "200000000");
  EXPECT_EQ(canonical_bucket_size_text("16384"), "16384");
  for (const char* bad : {"", "0", "-5", "1.5", "1e30", "big", "nan"}) {
    EXPECT_THROW(canonical_bucket_size_text(bad), std::invalid_argument) << bad;
  }
  const TrainConfig cfg = load_train_config("", {"--hidden_size=64", "--reduce_bucket_size=2e8"});
  EXPECT_EQ(cfg.reduce_bucket_size, "200000000");
  EXPECT_EQ(resolved_reduce_bucket_size(cfg), 200000000);
  EXPECT_EQ(resolved_reduce_bucket_size(load_train_config("", {"--hidden_size=64"})), 64 * 64);
  EXPECT_EQ(resolved_allgather_bucket_size(cfg), 500000000);
}

// The example configs in jobs/recipes load with the default recipe and set what they say.
TEST(ConfigDeepSpeed, ExampleConfigsLoad) {
  const std::string recipes = kSourceDir + "/jobs/recipes/";
  const TrainConfig z2 = load_train_config(recipes + "default.yaml", {}, recipes + "ds_zero2_auto.json");
  EXPECT_EQ(z2.zero_stage, 2);
  EXPECT_EQ(z2.per_device_train_batch_size, 8);  // "auto": default.yaml's
  EXPECT_EQ(z2.allgather_bucket_size, "200000000");
  EXPECT_EQ(z2.reduce_bucket_size, "auto");
  EXPECT_EQ(z2.lr_scheduler_type, "ds_warmup_decay");  // its scheduler block, every param "auto"
  EXPECT_DOUBLE_EQ(z2.learning_rate, 1.5e-3);           // default.yaml's
  EXPECT_DOUBLE_EQ(z2.warmup_ratio, 0.05);
  const TrainConfig z3 = load_train_config(recipes + "default.yaml", {}, recipes + "ds_zero3_zeropp.json");
  EXPECT_EQ(z3.zero_stage, 3);
  EXPECT_TRUE(z3.zero_quantized_weights);
  EXPECT_TRUE(z3.zero_quantized_gradients);
  EXPECT_EQ(z3.zero_hpz_partition_size, 2);
  EXPECT_EQ(z3.reduce_bucket_size, "10000000");
}

}  // namespace
}  // namespace shardft

namespace shardft {
namespace {

// DeepSpeed's fp16 block sets the recipe keys of its names; "auto" leaves the recipe's value.
TEST(ConfigDeepSpeed, TheFp16BlockSetsTheLossScalingKeys) {
  const std::string ds = write("ds_fp16.json", R"({"fp16": {"enabled": true, "loss_scale": 0,
    "initial_scale_power": 12, "loss_scale_window": 500, "hysteresis": 3, "consecutive_hysteresis": true,
    "min_loss_scale": 4, "auto_cast": false}})");
  const TrainConfig cfg = load_train_config("", {}, ds);
  EXPECT_TRUE(cfg.fp16);
  EXPECT_FALSE(cfg.bf16);
  EXPECT_EQ(cfg.loss_scale, 0);
  EXPECT_EQ(cfg.initial_scale_power, 12);
  EXPECT_EQ(cfg.loss_scale_window, 500);
  EXPECT_EQ(cfg.hysteresis, 3);
  EXPECT_TRUE(cfg.consecutive_hysteresis);
  EXPECT_EQ(cfg.min_loss_scale, 4);
  const std::string report = describe_deepspeed_config(read_deepspeed_config(ds), cfg, 1);
  EXPECT_NE(report.find("fp16.initial_scale_power = 12 -> initial_scale_power = 12"), std::string::npos) << report;
  EXPECT_NE(report.find("fp16.auto_cast = false: as shardft with false"), std::string::npos) << report;

  const std::string static_scale = write("ds_fp16_static.json", R"({"fp16": {"enabled": "auto", "loss_scale": 128}})");
  const TrainConfig off = load_train_config("", {}, static_scale);
  EXPECT_FALSE(off.fp16);  // auto: the recipe's fp16 (default false)
  EXPECT_EQ(off.loss_scale, 128);
  EXPECT_TRUE(load_train_config("", {"--fp16"}, static_scale).fp16);
}

TEST(ConfigDeepSpeed, Fp16AndBf16TogetherAreRejectedNamingBoth) {
  const std::string ds = write("ds_both.json", R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})");
  const std::string msg = error_of(ds);
  EXPECT_NE(msg.find("bf16 and fp16 are both on"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bf16 = true"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fp16 = true"), std::string::npos) << msg;
  EXPECT_THROW(load_train_config("", {"--bf16", "--fp16"}), ConfigError);
  EXPECT_THROW(load_train_config("", {"--fp16", "--min_loss_scale=1024", "--initial_scale_power=8"}), ConfigError);
}

}  // namespace
}  // namespace shardft
