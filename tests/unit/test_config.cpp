// The recipe: YAML and --key=value parsing, the error messages users see, validation and the
// to_yaml round trip.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config/recipe_schema.hpp"
#include "config/train_config.hpp"

namespace shardft {
namespace {

namespace fs = std::filesystem;

// Each test gets its own directory for the recipes it writes.
class ConfigRecipeDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("shardft_config_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes `text` to dir/name and returns the path.
  std::string write_recipe(const std::string& text, const std::string& name = "recipe.yaml") {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

// The message of the ConfigError that `action` throws; a test failure when it throws none.
std::string config_error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

std::string override_error(const std::vector<std::string>& overrides) {
  return config_error_of([&] { load_train_config("", overrides); });
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

std::string value_of(const TrainConfig& cfg, const std::string& key) {
  const RecipeKey* spec = find_recipe_key(key);
  if (spec == nullptr) {
    ADD_FAILURE() << "no key " << key;
    return "";
  }
  return value_text(cfg, *spec);
}

// ---- loading ------------------------------------------------------------------------------

TEST(ConfigDefaults, NoRecipeNoOverridesGivesStructDefaults) {
  const TrainConfig cfg = load_train_config("", {});
  const TrainConfig defaults;
  EXPECT_EQ(to_yaml(cfg), to_yaml(defaults));
  EXPECT_DOUBLE_EQ(cfg.learning_rate, 3e-3);
  EXPECT_EQ(cfg.lr_scheduler_type, "cosine");
  EXPECT_EQ(cfg.seed, 42u);
  EXPECT_EQ(cfg.model.hidden_size, 128);
  EXPECT_TRUE(cfg.sources.empty());
}

TEST(ConfigDefaults, StructDefaultsAreValid) {
  const TrainConfig defaults;
  EXPECT_NO_THROW(validate(defaults));
}

TEST_F(ConfigRecipeDir, YamlSetsValuesAndRecordsSources) {
  const std::string path = write_recipe(
      "# a trl-style recipe\n"
      "learning_rate: 2.0e-4\n"
      "lr_scheduler_type: linear\n"
      "max_steps: 50\n"
      "seed: 1234\n"
      "bf16: yes\n"
      "do_eval: false\n"
      "output_dir: runs/my run\n"
      "hidden_size: 256\n"
      "rope_theta: 500000\n");
  const TrainConfig cfg = load_train_config(path, {});
  EXPECT_DOUBLE_EQ(cfg.learning_rate, 2e-4);
  EXPECT_EQ(cfg.lr_scheduler_type, "linear");
  EXPECT_EQ(cfg.max_steps, 50);
  EXPECT_EQ(cfg.seed, 1234u);
  EXPECT_TRUE(cfg.bf16);
  EXPECT_FALSE(cfg.do_eval);
  EXPECT_EQ(cfg.output_dir, "runs/my run");
  EXPECT_EQ(cfg.model.hidden_size, 256);
  EXPECT_DOUBLE_EQ(cfg.model.rope_theta, 500000.0);
  EXPECT_EQ(cfg.per_device_train_batch_size, 8);  // untouched keys keep their defaults
  EXPECT_EQ(source_of(cfg, "learning_rate"), path + ":2");
  EXPECT_EQ(source_of(cfg, "rope_theta"), path + ":10");
  EXPECT_EQ(source_of(cfg, "warmup_steps"), "");
}

TEST_F(ConfigRecipeDir, EmptyRecipeIsAnErrorNamingTheFile) {
  for (const char* text : {"", "# nothing yet\n", "\n\n"}) {
    const std::string path = write_recipe(text);
    try {
      load_train_config(path, {});
      FAIL() << "an empty recipe was accepted: '" << text << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": the recipe has no keys"), std::string::npos) << e.what();
    }
  }
}

TEST_F(ConfigRecipeDir, DatasetsAndDatasetPathTogetherAreRefused) {
  const std::string path = write_recipe("datasets: [a.jsonl, b.jsonl]\ndataset_path: c.jsonl\n");
  try {
    load_train_config(path, {});
    FAIL() << "datasets and dataset_path were both accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("datasets and dataset_path both name the training data"), std::string::npos) << what;
    EXPECT_NE(what.find("dataset_path = c.jsonl (" + path + ":2)"), std::string::npos) << what;
  }
  // Either alone is fine, datasets beside the default dataset_path too.
  EXPECT_NO_THROW(load_train_config(write_recipe("datasets: [a.jsonl]\n"), {}));
  EXPECT_NO_THROW(load_train_config(write_recipe("dataset_path: c.jsonl\n"), {}));
}

TEST_F(ConfigRecipeDir, NestedModelMapping) {
  const std::string path = write_recipe(
      "learning_rate: 1.0e-3\n"
      "model:\n"
      "  hidden_size: 64\n"
      "  num_attention_heads: 8\n"
      "  num_key_value_heads: 8\n"
      "  tie_word_embeddings: false\n"
      "  rms_norm_eps: 1.0e-6\n"
      "vocab_size: 300\n");
  const TrainConfig cfg = load_train_config(path, {});
  EXPECT_EQ(cfg.model.hidden_size, 64);
  EXPECT_EQ(cfg.model.num_attention_heads, 8);
  EXPECT_EQ(cfg.model.num_key_value_heads, 8);
  EXPECT_FALSE(cfg.model.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(cfg.model.rms_norm_eps, 1e-6);
  EXPECT_EQ(cfg.model.vocab_size, 300);
  EXPECT_EQ(source_of(cfg, "hidden_size"), path + ":3");
}

TEST_F(ConfigRecipeDir, TrlMaxLengthIsMaxSeqLength) {
  const TrainConfig cfg = load_train_config(write_recipe("max_length: 100\n"), {});
  EXPECT_EQ(cfg.max_seq_length, 100);
}

TEST_F(ConfigRecipeDir, OverridesWinOverYamlInBothForms) {
  const std::string path = write_recipe("learning_rate: 0.5\nseed: 1\nbf16: false\nwarmup_steps: 3\n");
  const TrainConfig cfg =
      load_train_config(path, {"--learning_rate=1e-3", "--seed", "7", "--bf16", "--warmup_steps", "-0"});
  EXPECT_DOUBLE_EQ(cfg.learning_rate, 1e-3);
  EXPECT_EQ(cfg.seed, 7u);
  EXPECT_TRUE(cfg.bf16);
  EXPECT_EQ(cfg.warmup_steps, 0);
  EXPECT_EQ(source_of(cfg, "learning_rate"), "--learning_rate");
  EXPECT_EQ(source_of(cfg, "seed"), "--seed");
  EXPECT_EQ(source_of(cfg, "bf16"), "--bf16");
}

TEST(ConfigOverrides, BareBoolFlagMeansTrue) {
  EXPECT_TRUE(load_train_config("", {"--bf16"}).bf16);                       // at the end
  const TrainConfig cfg = load_train_config("", {"--bf16", "--seed=3"});      // before another flag
  EXPECT_TRUE(cfg.bf16);
  EXPECT_EQ(cfg.seed, 3u);
  EXPECT_FALSE(load_train_config("", {"--bf16", "false"}).bf16);              // explicit value
  EXPECT_FALSE(load_train_config("", {"--do_eval=no"}).do_eval);
  EXPECT_TRUE(load_train_config("", {"--bf16=1"}).bf16);
}

TEST(ConfigOverrides, NegativeNumberIsAValueNotAFlag) {
  EXPECT_EQ(load_train_config("", {"--max_steps", "5", "--max_steps", "-1"}).max_steps, -1);
}

TEST(ConfigOverrides, DashedAndModelPrefixedSpellings) {
  const TrainConfig cfg = load_train_config("", {"--learning-rate=0.01", "--model.hidden_size=256"});
  EXPECT_DOUBLE_EQ(cfg.learning_rate, 0.01);
  EXPECT_EQ(cfg.model.hidden_size, 256);
}

// A valid, non-default value for every key; a new key without one here fails the test below.
const std::map<std::string, std::string>& sample_values() {
  static const std::map<std::string, std::string> samples = {
      {"model_name_or_path", SHARDFT_REFERENCE_DIR "/hf/tiny_qwen2"},
      {"dataset_path", "data/a.jsonl"}, {"max_memory_per_rank", "12GiB"}, {"dataset_cache_dir", "/tmp/shardft-cache"}, {"peak_tflops", "989.0"}, {"eval_dataset_path", "data/b.jsonl"}, {"max_seq_length", "128"}, {"packing", "true"}, {"packing_strategy", "bfd"}, {"assistant_only_loss", "false"}, {"completion_only_loss", "false"},
      {"datasets", R"([{"path": "data/a.jsonl", "weight": 2.0}, {"path": "data/b.json", "weight": 0.5}])"},
      {"dataset_text_field", "content"}, {"role_map", R"({"bot": "assistant", "tool": "user"})"},
      {"skip_bad_samples", "true"}, {"tokenizer_name_or_path", "models/qwen2"}, {"chat_template", "chatml"},
      {"learning_rate", "0.0002"}, {"lr_scheduler_type", "cosine_with_min_lr"}, {"warmup_steps", "5"},
      {"warmup_ratio", "0.1"}, {"min_lr", "1.0e-05"}, {"lr_scheduler_kwargs", R"({"num_cycles": 0.75})"}, {"min_lr_rate", "0.1"}, {"warmup_type", "linear"}, {"warmup_min_lr", "1.0e-06"},
      {"warmup_min_ratio", "0.1"}, {"cos_min_ratio", "0.01"}, {"weight_decay", "0.01"},
      {"max_grad_norm", "0.5"}, {"optim", "adamw_torch_fused"}, {"adam_beta1", "0.8"}, {"adam_beta2", "0.95"}, {"adam_epsilon", "1.0e-06"},
      {"per_device_train_batch_size", "4"}, {"train_batch_size", "64"}, {"per_device_eval_batch_size", "2"},
      {"gradient_accumulation_steps", "3"}, {"num_train_epochs", "1.5"}, {"max_steps", "100"},
      {"logging_steps", "1"}, {"logging_first_step", "true"}, {"data_seed", "7"}, {"report_to", "tensorboard"}, {"logging_dir", "tb/x"}, {"run_name", "sft-x"}, {"disable_tqdm", "true"}, {"log_level", "debug"}, {"save_strategy", "epoch"}, {"save_steps", "20"}, {"save_total_limit", "3"}, {"export_dtype", "bf16"}, {"max_shard_size", "2GiB"}, {"resume_from_checkpoint", "runs/x/checkpoint-5"}, {"output_dir", "runs/x"}, {"overwrite_output_dir", "true"}, {"seed", "18446744073709551615"},
      {"bf16", "true"}, {"fp16", "true"}, {"loss_scale", "128.5"}, {"initial_scale_power", "12"}, {"loss_scale_window", "500"}, {"hysteresis", "3"}, {"consecutive_hysteresis", "true"}, {"min_loss_scale", "0.5"}, {"gradient_checkpointing", "true"}, {"neftune_noise_alpha", "5.0"}, {"logits_chunk_tokens", "512"}, {"attn_implementation", "eager"}, {"deterministic_attention", "false"}, {"zero_stage", "3"}, {"use_peft", "true"}, {"peft_type", "lora"}, {"lora_r", "8"}, {"lora_alpha", "16.0"}, {"lora_dropout", "0.1"}, {"lora_target_modules", "all-linear"}, {"use_rslora", "true"}, {"lora_bias", "none"}, {"adapter_path", "adapters/a"}, {"load_in_4bit", "true"}, {"bnb_4bit_quant_type", "nf4"}, {"bnb_4bit_use_double_quant", "false"}, {"bnb_4bit_compute_dtype", "float32"}, {"ranks_per_node", "2"}, {"sharding_strategy", "HYBRID_SHARD"}, {"shard_group_size", "2"}, {"collectives", "mpi"}, {"collective_timeout_s", "20.5"},
      {"communication_data_type", "bf16"}, {"reduce_bucket_size", "200000000"}, {"allgather_bucket_size", "50000000"}, {"overlap_comm", "false"},
      {"optimizer_overlap", "true"}, {"optimizer_overlap_sms", "16"},
      {"zero_quantized_weights", "true"}, {"zero_quantized_gradients", "true"},
      {"zero_hpz_partition_size", "2"}, {"zero_quantization_block_size", "128"}, {"do_eval", "false"}, {"eval_max_new_tokens", "8"}, {"eval_samples", "10"},
      {"eval_strategy", "epoch"}, {"eval_steps", "5"}, {"eval_on_start", "true"}, {"eval_generate", "true"},
      {"val_set_size", "0.1"}, {"metric_for_best_model", "exact_match"}, {"greater_is_better", "false"},
      {"load_best_model_at_end", "true"}, {"early_stopping_patience", "3"}, {"early_stopping_threshold", "0.01"},
      {"vocab_size", "32000"}, {"hidden_size", "256"}, {"num_hidden_layers", "4"}, {"num_attention_heads", "8"},
      {"num_key_value_heads", "4"}, {"intermediate_size", "512"}, {"rope_theta", "500000.0"},
      {"rms_norm_eps", "1.0e-06"}, {"tie_word_embeddings", "false"}, {"qkv_bias", "true"}, {"o_bias", "true"},
      {"head_dim", "64"}, {"qk_norm", "true"}, {"max_position_embeddings", "512"},
      {"initializer_range", "0.01"},
  };
  return samples;
}

// Keys that are only valid together with another one.
std::vector<std::string> companions_of(const std::string& key) {
  if (key == "lr_scheduler_type") return {"--min_lr=1e-5"};
  if (key == "min_lr" || key == "min_lr_rate") return {"--lr_scheduler_type=cosine_with_min_lr"};
  if (key == "warmup_type" || key == "warmup_min_lr") return {"--lr_scheduler_type=ds_warmup", "--warmup_steps=5"};
  if (key == "warmup_min_ratio" || key == "cos_min_ratio") {
    return {"--lr_scheduler_type=ds_warmup_cosine", "--warmup_steps=5"};
  }
  if (key == "zero_quantized_weights" || key == "zero_quantized_gradients" || key == "zero_hpz_partition_size") {
    return {"--zero_stage=3"};
  }
  if (key == "o_bias") return {"--qkv_bias=true"};
  if (key == "load_in_4bit") return {"--use_peft=true"};
  if (key == "load_best_model_at_end") return {"--eval_strategy=steps", "--eval_steps=10", "--save_steps=10"};
  if (key == "early_stopping_patience") return {"--eval_strategy=steps"};
  return {};
}

TEST(ConfigOverrides, EveryKeyInTheSchemaCanBeSet) {
  const TrainConfig defaults;
  ASSERT_EQ(sample_values().size(), recipe_keys().size());
  for (const RecipeKey& key : recipe_keys()) {
    SCOPED_TRACE(key.name);
    const auto sample = sample_values().find(key.name);
    ASSERT_NE(sample, sample_values().end()) << "no sample value for " << key.name;
    // lora_bias accepts only its default (PEFT's none): no other value to set it to
    if (key.choices.size() != 1) {
      ASSERT_NE(value_text(defaults, key), sample->second) << "sample equals the default";
    }

    std::vector<std::string> overrides = companions_of(key.name);
    overrides.push_back("--" + key.name + "=" + sample->second);
    const TrainConfig with_equals = load_train_config("", overrides);
    EXPECT_EQ(value_text(with_equals, key), sample->second);
    EXPECT_EQ(source_of(with_equals, key.name), "--" + key.name);

    overrides.back() = "--" + key.name;
    overrides.push_back(sample->second);
    EXPECT_EQ(value_text(load_train_config("", overrides), key), sample->second);
  }
}

TEST(ConfigCrossKeyChecks, ZeroPlusPlusNeedsItsStage) {
  EXPECT_NO_THROW(load_train_config("", {"--zero_stage=3", "--zero_quantized_weights", "--zero_hpz_partition_size=2"}));
  EXPECT_NO_THROW(load_train_config("", {"--zero_stage=2", "--zero_quantized_gradients"}));
  EXPECT_NO_THROW(load_train_config("", {"--sharding_strategy=FULL_SHARD", "--zero_quantized_weights"}));
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--zero_quantized_weights"},
                                                               {"--zero_stage=2", "--zero_hpz_partition_size=2"},
                                                               {"--zero_stage=1", "--zero_quantized_gradients"}}) {
    try {
      load_train_config("", bad);
      ADD_FAILURE() << bad[0] << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("zero_stage"), std::string::npos) << e.what();
    }
  }
  try {
    load_train_config("", {"--sharding_strategy=SHARD_GRAD_OP", "--zero_stage=3"});
    ADD_FAILURE() << "a contradicting sharding_strategy and zero_stage were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sharding_strategy SHARD_GRAD_OP means zero_stage 2"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(load_train_config("", {"--sharding_strategy=HYBRID_SHARD"}).zero_stage, 3);
  EXPECT_EQ(load_train_config("", {"--sharding_strategy=NO_SHARD"}).zero_stage, 0);
}

// Keys set for a feature the run leaves off are reported (the run logs them as warnings), naming where
// each was set; values equal to the default and keys of a feature that is on are not.
TEST_F(ConfigRecipeDir, KeysOfFeaturesThatAreOffAreReported) {
  const std::string path = write_recipe("lora_r: 64\nlora_alpha: 32\nloss_scale: 0\n");
  const auto off = ineffective_keys(load_train_config(path, {"--use_peft=false", "--loss_scale=128",
                                                             "--bnb_4bit_compute_dtype=bfloat16"}));
  ASSERT_EQ(off.size(), 3u) << testing::PrintToString(off);
  EXPECT_EQ(off[0], path + ":1: lora_r = 64 has no effect: LoRA is off (use_peft: false, no peft_type lora, no "
                           "adapter_path)");
  EXPECT_NE(off[1].find("--loss_scale: loss_scale = 128.0 has no effect: loss scaling applies only with fp16: true"),
            std::string::npos)
      << off[1];
  EXPECT_NE(off[2].find("bnb_4bit_compute_dtype = bfloat16 has no effect"), std::string::npos) << off[2];
  // lora_alpha 32 is the default; with LoRA and fp16 on nothing is left unused.
  EXPECT_TRUE(ineffective_keys(load_train_config(path, {"--use_peft=true", "--fp16=true", "--loss_scale=128"})).empty());
}

TEST(ConfigSchema, KeysAreUniqueAndDocumented) {
  std::map<std::string, int> seen;
  for (const RecipeKey& key : recipe_keys()) {
    EXPECT_EQ(++seen[key.name], 1) << key.name;
    for (const std::string& alias : key.aliases) EXPECT_EQ(++seen[alias], 1) << alias;
    EXPECT_FALSE(key.doc.empty()) << key.name;
    EXPECT_EQ(find_recipe_key(key.name), &key);
  }
  for (const char* model_key : {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                "intermediate_size", "vocab_size", "rope_theta", "rms_norm_eps",
                                "tie_word_embeddings", "qkv_bias", "o_bias", "max_position_embeddings",
                                "initializer_range", "head_dim", "qk_norm"}) {
    const RecipeKey* key = find_recipe_key(model_key);
    ASSERT_NE(key, nullptr) << model_key;
    EXPECT_TRUE(key->is_model_key) << model_key;
  }
}

// ---- error messages -----------------------------------------------------------------------

using ConfigErrors = ConfigRecipeDir;

TEST_F(ConfigErrors, UnknownKeyInRecipeSuggestsClosest) {
  const std::string path = write_recipe("seed: 1\nlearning_rat: 0.1\n");
  const std::string msg = config_error_of([&] { load_train_config(path, {}); });
  EXPECT_CONTAINS(msg, path + ":2: unknown key 'learning_rat' (did you mean 'learning_rate'?)");
}

TEST_F(ConfigErrors, UnknownKeyFarFromAllGetsNoSuggestion) {
  const std::string path = write_recipe("completely_different: 1\n");
  const std::string msg = config_error_of([&] { load_train_config(path, {}); });
  EXPECT_CONTAINS(msg, path + ":1: unknown key 'completely_different'");
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << msg;
}

TEST_F(ConfigErrors, UnknownKeyUnderModel) {
  const std::string path = write_recipe("model:\n  hiden_size: 64\n");
  const std::string msg = config_error_of([&] { load_train_config(path, {}); });
  EXPECT_CONTAINS(msg, path + ":2: unknown key 'hiden_size' under 'model'");
  EXPECT_CONTAINS(msg, "did you mean 'hidden_size'?");
}

TEST_F(ConfigErrors, TrainingKeyUnderModel) {
  const std::string path = write_recipe("model:\n  hidden_size: 64\n  learning_rate: 0.1\n");
  const std::string msg = config_error_of([&] { load_train_config(path, {}); });
  EXPECT_CONTAINS(msg, path + ":3: key 'learning_rate' is not a model key");
}

TEST(ConfigOverrideErrors, UnknownKeySuggestsClosest) {
  EXPECT_CONTAINS(override_error({"--learning_rat=0.1"}),
                  "--learning_rat: unknown key 'learning_rat' (did you mean 'learning_rate'?)");
  EXPECT_CONTAINS(override_error({"--per_device_train_batchsize", "2"}),
                  "did you mean 'per_device_train_batch_size'?");
}

TEST(ConfigOverrideErrors, NotAFlagOrMissingValue) {
  EXPECT_CONTAINS(override_error({"learning_rate=0.1"}), "unexpected argument 'learning_rate=0.1'");
  EXPECT_CONTAINS(override_error({"--seed"}), "--seed: key 'seed' needs a value");
  EXPECT_CONTAINS(override_error({"--learning_rate", "--bf16"}), "--learning_rate: key 'learning_rate' needs a value");
}

TEST_F(ConfigErrors, WrongTypeInRecipe) {
  const std::string path = write_recipe("seed: 3\nmax_steps: 10\nlearning_rate: abc\n");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(path, {}); }),
                  path + ":3: key 'learning_rate' expects a number, got 'abc'");

  const std::string ints = write_recipe("max_steps: 1.5\n", "ints.yaml");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(ints, {}); }),
                  ints + ":1: key 'max_steps' expects an integer, got '1.5'");

  const std::string bools = write_recipe("\nbf16: maybe\n", "bools.yaml");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(bools, {}); }),
                  bools + ":2: key 'bf16' expects true, false or auto, got 'maybe'");

  const std::string seeds = write_recipe("seed: -1\n", "seeds.yaml");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(seeds, {}); }),
                  seeds + ":1: key 'seed' expects a non-negative integer, got '-1'");
}

TEST(ConfigOverrideErrors, WrongType) {
  EXPECT_CONTAINS(override_error({"--learning_rate=fast"}),
                  "--learning_rate: key 'learning_rate' expects a number, got 'fast'");
  EXPECT_CONTAINS(override_error({"--bf16=2"}), "--bf16: key 'bf16' expects true, false or auto, got '2'");
  EXPECT_CONTAINS(override_error({"--max_steps", "99999999999"}), "key 'max_steps' expects an integer");
  EXPECT_CONTAINS(override_error({"--learning_rate=inf"}), "expects a number, got 'inf'");
  EXPECT_CONTAINS(override_error({"--learning_rate="}), "expects a number, got ''");
}

TEST_F(ConfigErrors, OutOfRangeInRecipeNamesLine) {
  const std::string path = write_recipe("seed: 1\nbf16: true\nmax_steps: 4\n\nadam_beta1: 1.5\n");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(path, {}); }),
                  path + ":5: key 'adam_beta1' must be in [0, 1), got 1.5");
}

TEST_F(ConfigErrors, OverrideCanRepairARecipeValue) {
  const std::string path = write_recipe("adam_beta1: 1.5\n");
  EXPECT_DOUBLE_EQ(load_train_config(path, {"--adam_beta1=0.5"}).adam_beta1, 0.5);
}

TEST(ConfigOverrideErrors, OutOfRangeNamesFlag) {
  EXPECT_CONTAINS(override_error({"--adam_beta1=1.5"}), "--adam_beta1: key 'adam_beta1' must be in [0, 1), got 1.5");
}

// One rule per row: the override that breaks it and what the message must say.
TEST(ConfigOverrideErrors, EveryRangeRule) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--warmup_ratio=1.5", "key 'warmup_ratio' must be in [0, 1], got 1.5"},
      {"--warmup_ratio=-0.1", "key 'warmup_ratio' must be in [0, 1]"},
      {"--learning_rate=0", "key 'learning_rate' must be > 0, got 0.0"},
      {"--learning_rate=-1e-3", "key 'learning_rate' must be > 0"},
      {"--per_device_train_batch_size=0", "key 'per_device_train_batch_size' must be >= 1, got 0"},
      {"--per_device_eval_batch_size=0", "key 'per_device_eval_batch_size' must be >= 1"},
      {"--gradient_accumulation_steps=0", "key 'gradient_accumulation_steps' must be >= 1"},
      {"--logging_steps=0", "key 'logging_steps' must be >= 1"},
      {"--max_seq_length=1", "key 'max_seq_length' must be >= 2, got 1"},
      {"--eval_max_new_tokens=0", "key 'eval_max_new_tokens' must be >= 1"},
      {"--rms_norm_eps=0", "key 'rms_norm_eps' must be > 0"},
      {"--rope_theta=-5", "key 'rope_theta' must be > 0"},
      {"--max_steps=0", "key 'max_steps' must be -1 or >= 1, got 0"},
      {"--max_steps=-2", "key 'max_steps' must be -1 or >= 1, got -2"},
      {"--adam_beta2=1", "key 'adam_beta2' must be in [0, 1), got 1.0"},
      {"--eval_samples=0", "key 'eval_samples' must be -1 or >= 1"},
      {"--num_attention_heads=0", "key 'num_attention_heads' must be >= 1"},
      {"--output_dir=", "key 'output_dir' must not be empty"},
      {"--lr_scheduler_type=cosinee",
       "key 'lr_scheduler_type' must be one of constant, constant_with_warmup, linear, cosine, cosine_with_min_lr, "
       "cosine_with_restarts, warmup_stable_decay, ds_warmup, ds_warmup_decay, ds_warmup_cosine, got 'cosinee'"},
      {"--warmup_type=exp", "key 'warmup_type' must be one of log, linear, got 'exp'"},
  };
  for (const auto& [flag, expected] : cases) {
    SCOPED_TRACE(flag);
    const std::string msg = override_error({flag});
    EXPECT_CONTAINS(msg, expected);
    EXPECT_EQ(msg.rfind(flag.substr(0, flag.find('=')) + ": ", 0), 0u) << msg;  // starts with the flag
  }
}

TEST_F(ConfigErrors, MissingFile) {
  const std::string path = (dir_ / "x.yaml").string();
  EXPECT_EQ(config_error_of([&] { load_train_config(path, {}); }),
            "cannot open recipe '" + path + "': No such file or directory");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(dir_.string(), {}); }), "Is a directory");
}

TEST_F(ConfigErrors, YamlSyntaxErrorNamesLine) {
  const std::string path = write_recipe("seed: 1\nlearning_rate: [0.1\nbf16: true\n");
  const std::string msg = config_error_of([&] { load_train_config(path, {}); });
  EXPECT_EQ(msg.rfind(path + ":", 0), 0u) << msg;
  EXPECT_NE(msg.find_first_of("0123456789", path.size() + 1), std::string::npos) << msg;
}

TEST_F(ConfigErrors, SequenceOrMappingWhereScalarExpected) {
  const std::string seq = write_recipe("seed: 1\nlearning_rate: [0.1, 0.2]\n");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(seq, {}); }),
                  seq + ":2: key 'learning_rate' expects a number, got a sequence");
  const std::string map = write_recipe("output_dir:\n  a: b\n", "map.yaml");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(map, {}); }),
                  map + ":1: key 'output_dir' expects a string, got a mapping");
  const std::string model = write_recipe("model: llama\n", "model.yaml");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(model, {}); }), model + ":1: key 'model' expects a mapping");
  const std::string root = write_recipe("- seed: 1\n", "root.yaml");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(root, {}); }), "a recipe is a mapping");
  const std::string empty_value = write_recipe("seed:\n", "empty.yaml");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(empty_value, {}); }),
                  empty_value + ":1: key 'seed' expects a non-negative integer, got nothing");
}

TEST_F(ConfigErrors, KeySetTwice) {
  const std::string path = write_recipe("hidden_size: 64\nseed: 1\nmodel:\n  hidden_size: 64\n");
  EXPECT_CONTAINS(config_error_of([&] { load_train_config(path, {}); }),
                  path + ":4: key 'hidden_size' is set twice (first at " + path + ":1)");
}

// ---- checks across keys -------------------------------------------------------------------

TEST_F(ConfigErrors, CrossKeyChecksNameBothKeysAndWhereTheyWereSet) {
  const std::string path = write_recipe("hidden_size: 100\nnum_attention_heads: 3\n");
  const std::string msg = config_error_of([&] { load_train_config(path, {}); });
  EXPECT_CONTAINS(msg, path + ":1: hidden_size must be divisible by num_attention_heads");
  EXPECT_CONTAINS(msg, "hidden_size = 100 (" + path + ":1)");
  EXPECT_CONTAINS(msg, "num_attention_heads = 3 (" + path + ":2)");
}

TEST(ConfigCrossKeyChecks, ModelShape) {
  EXPECT_CONTAINS(override_error({"--num_attention_heads=5"}), "hidden_size must be divisible by num_attention_heads");
  // 128 / 128 = 1: divisible, but RoPE needs an even head_dim.
  EXPECT_CONTAINS(override_error({"--num_attention_heads=128", "--num_key_value_heads=1"}), "must be even");
  EXPECT_CONTAINS(override_error({"--num_key_value_heads=3"}),
                  "--num_key_value_heads: num_attention_heads must be divisible by num_key_value_heads");
  EXPECT_CONTAINS(override_error({"--max_seq_length=512"}), "max_seq_length must not exceed max_position_embeddings");
  EXPECT_CONTAINS(override_error({"--o_bias"}), "--o_bias: o_bias needs qkv_bias");
  EXPECT_NO_THROW(load_train_config("", {"--qkv_bias"}));                // Qwen2
  EXPECT_NO_THROW(load_train_config("", {"--qkv_bias", "--o_bias"}));    // Llama attention_bias
}

// A key HF / trl users bring over that shardft has no key for: what to do instead, not a typo guess.
TEST(ConfigHfKeys, KnownHfKeysSayWhatToDoInstead) {
  const std::string logging = override_error({"--logging_strategy=steps"});
  EXPECT_CONTAINS(logging, "--logging_strategy: key 'logging_strategy' is not supported by shardft: shardft logs every");
  EXPECT_EQ(logging.find("did you mean"), std::string::npos) << logging;
  EXPECT_CONTAINS(override_error({"--optim=adamw_bnb_8bit"}),
                  "optim 'adamw_bnb_8bit' is not implemented: shardft's optimizer is AdamW with fp32 moments");
  EXPECT_CONTAINS(override_error({"--optim=adamw_bnb_8bit"}), "ZeRO stages 1-3 shard them");
  EXPECT_NO_THROW(load_train_config("", {"--optim=adamw_torch_fused"}));
  EXPECT_CONTAINS(override_error({"--deepspeed_config=x.json"}), "unknown key 'deepspeed_config'");  // not one of them
}

// trl's default learning rate where a checkpoint is fine-tuned and none is set; the bundled task's
// otherwise, and any rate given wins.
TEST(ConfigDefaults, FineTuningACheckpointTakesTrlsLearningRate) {
  const std::string model = SHARDFT_REFERENCE_DIR "/hf/tiny_qwen2";
  const TrainConfig fine_tune = load_train_config("", {"--model_name_or_path", model});
  EXPECT_DOUBLE_EQ(fine_tune.learning_rate, 2e-5);
  EXPECT_EQ(source_of(fine_tune, "learning_rate"), "default for fine-tuning model_name_or_path (trl's SFTConfig)");
  EXPECT_DOUBLE_EQ(load_train_config("", {}).learning_rate, 3e-3);
  EXPECT_DOUBLE_EQ(load_train_config("", {"--model_name_or_path", model, "--learning_rate=1e-4"}).learning_rate, 1e-4);
}

TEST(ConfigCrossKeyChecks, RunNameIsOneFolder) {
  EXPECT_CONTAINS(override_error({"--run_name=a/b"}), "--run_name: run_name 'a/b' names a folder under output_dir/runs");
  EXPECT_CONTAINS(override_error({"--run_name=.."}), "must be a plain name");
  EXPECT_NO_THROW(load_train_config("", {"--run_name=sft-1"}));
}

TEST(ConfigCrossKeyChecks, CosineWithMinLrNeedsExactlyOneFloor) {
  EXPECT_CONTAINS(override_error({"--lr_scheduler_type=cosine_with_min_lr"}),
                  "--lr_scheduler_type: lr_scheduler_type cosine_with_min_lr needs exactly one of min_lr > 0 or "
                  "min_lr_rate > 0");
  EXPECT_CONTAINS(override_error({"--lr_scheduler_type=cosine_with_min_lr", "--min_lr=1e-5", "--min_lr_rate=0.1"}),
                  "needs exactly one of");
  EXPECT_CONTAINS(override_error({"--min_lr=1e-5"}), "apply only to lr_scheduler_type cosine_with_min_lr");
  EXPECT_CONTAINS(override_error({"--lr_scheduler_type=cosine_with_min_lr", "--min_lr=1"}),
                  "min_lr must not exceed learning_rate");
  const TrainConfig ok = load_train_config("", {"--lr_scheduler_type=cosine_with_min_lr", "--min_lr_rate=0.1"});
  EXPECT_DOUBLE_EQ(ok.min_lr_rate, 0.1);
}

TEST(ConfigCrossKeyChecks, EpochsNeededWhenMaxStepsIsUnset) {
  EXPECT_CONTAINS(override_error({"--num_train_epochs=0"}),
                  "--num_train_epochs: num_train_epochs must be > 0 when max_steps is -1");
  EXPECT_EQ(load_train_config("", {"--num_train_epochs=0", "--max_steps=10"}).max_steps, 10);
}

TEST(ConfigCrossKeyChecks, EvalNeedsADataset) {
  EXPECT_CONTAINS(override_error({"--eval_dataset_path="}), "do_eval needs an eval set: eval_dataset_path, or val_set_size");
  EXPECT_TRUE(load_train_config("", {"--eval_dataset_path=", "--do_eval=false"}).eval_dataset_path.empty());
}

TEST(ConfigValidate, ProgrammaticConfigWithoutSourcesNamesKey) {
  TrainConfig cfg;
  cfg.adam_beta2 = 2.0;
  EXPECT_EQ(config_error_of([&] { validate(cfg); }), "key 'adam_beta2' must be in [0, 1), got 2.0");
  TrainConfig other;
  other.max_grad_norm = std::nan("");
  EXPECT_CONTAINS(config_error_of([&] { validate(other); }), "key 'max_grad_norm' must be a finite number");
}

// ---- to_yaml ------------------------------------------------------------------------------

TEST(ConfigToYaml, OneLinePerKeyInSchemaOrder) {
  const TrainConfig defaults;
  const std::string yaml = to_yaml(defaults);
  std::istringstream lines(yaml);
  std::string line;
  std::size_t i = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(i, recipe_keys().size()) << line;
    EXPECT_EQ(line.rfind(recipe_keys()[i].name + ": ", 0), 0u) << line;
    ++i;
  }
  EXPECT_EQ(i, recipe_keys().size());
  EXPECT_CONTAINS(yaml, "learning_rate: 0.003\n");
  EXPECT_CONTAINS(yaml, "rope_theta: 10000.0\n");
  EXPECT_CONTAINS(yaml, "adam_epsilon: 1.0e-08\n");
  EXPECT_CONTAINS(yaml, "output_dir: runs/default\n");
}

TEST_F(ConfigRecipeDir, RoundTripThroughToYaml) {
  // Every key off its default, and strings that YAML would misread unless quoted.
  std::vector<std::string> overrides;
  for (const auto& [key, value] : sample_values()) {
    // The model keys are set here; a model directory would bring its own (tested in test_hf_import).
    // datasets replaces dataset_path (both given is an error); its round trip is checked below.
    if (key != "model_name_or_path" && key != "datasets") overrides.push_back("--" + key + "=" + value);
  }
  overrides.push_back("--min_lr_rate=0");  // cosine_with_min_lr takes one floor
  overrides.push_back("--fp16=false");    // one compute dtype: bf16 is the one off its default here
  overrides.push_back("--load_in_4bit=false");  // QLoRA takes stages 0-2 and double quantization; these are off
  overrides.push_back("--optimizer_overlap=false");  // a stage-0 setting, and zero_stage is 3 here
  overrides.push_back("--optimizer_overlap_sms=0");    // SMs for the overlapped step: none without it
  // DeepSpeed's schedule keys need a ds_* schedule (RoundTripWithADeepSpeedSchedule has them set).
  for (const char* reset : {"--warmup_type=log", "--warmup_min_lr=0", "--warmup_min_ratio=0",
                            "--cos_min_ratio=0.0001"}) {
    overrides.push_back(reset);
  }
  // The val_set_size split holds no conversations to generate from, so no exact_match to judge by.
  overrides.push_back("--eval_generate=false");
  overrides.push_back("--metric_for_best_model=eval_loss");
  overrides.push_back("--output_dir=runs/a: \"b\" #c\\d");
  overrides.push_back("--dataset_path=yes");
  overrides.push_back("--eval_dataset_path=");
  overrides.push_back("--learning_rate=0.1");
  overrides.push_back("--num_train_epochs=0.30000000000000004");
  const TrainConfig original = load_train_config("", overrides);

  const std::string path = write_recipe(to_yaml(original));
  const TrainConfig reloaded = load_train_config(path, {});
  for (const RecipeKey& key : recipe_keys()) {
    EXPECT_EQ(value_of(reloaded, key.name), value_of(original, key.name)) << key.name;
  }
  EXPECT_EQ(reloaded.output_dir, "runs/a: \"b\" #c\\d");
  EXPECT_EQ(reloaded.dataset_path, "yes");
  EXPECT_EQ(reloaded.eval_dataset_path, "");
  EXPECT_EQ(reloaded.num_train_epochs, 0.30000000000000004);  // exact, not just close
  EXPECT_EQ(reloaded.seed, 18446744073709551615ull);
  EXPECT_EQ(to_yaml(reloaded), to_yaml(original));
}

TEST_F(ConfigRecipeDir, RoundTripWithADatasetsMixture) {
  // datasets replaces dataset_path, so the written recipe leaves dataset_path out and loads again.
  const TrainConfig original = load_train_config("", {"--datasets=" + sample_values().at("datasets")});
  const std::string yaml = to_yaml(original);
  EXPECT_EQ(yaml.find("\ndataset_path:"), std::string::npos) << yaml;
  const TrainConfig reloaded = load_train_config(write_recipe(yaml), {});
  EXPECT_EQ(reloaded.datasets, original.datasets);
  EXPECT_EQ(to_yaml(reloaded), yaml);
}

TEST_F(ConfigRecipeDir, RoundTripWithADeepSpeedSchedule) {
  const TrainConfig original =
      load_train_config("", {"--lr_scheduler_type=ds_warmup_cosine", "--warmup_steps=5", "--warmup_type=linear",
                             "--warmup_min_ratio=0.1", "--cos_min_ratio=0.01"});
  EXPECT_EQ(to_yaml(load_train_config(write_recipe(to_yaml(original)), {})), to_yaml(original));
}

TEST(ConfigToYaml, FormatDoubleIsShortestExact) {
  for (double v : {0.1, 3e-3, 1e-8, 10000.0, 0.30000000000000004, 1.0 / 3.0, -1.0, 1e20, 5e-324}) {
    const std::string text = format_double(v);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), v) << text;
    EXPECT_NE(text.find_first_of(".e"), std::string::npos) << text;
    EXPECT_NE(text.find('.'), std::string::npos) << text;
  }
  EXPECT_EQ(format_double(0.1), "0.1");
  EXPECT_EQ(format_double(1e20), "1.0e+20");
}

}  // namespace
}  // namespace shardft

namespace shardft {
namespace {

// Evaluation during training: HF's names and HF's rules between them.
TEST(ConfigEvalKeys, HfNamesAndDefaults) {
  const TrainConfig c = load_train_config("", {"--evaluation_strategy=steps", "--greater_is_better=True"});
  EXPECT_EQ(c.eval_strategy, "steps");  // HF's name before 4.46
  EXPECT_EQ(eval_interval_steps(c), c.logging_steps);  // eval_steps unset: logging_steps, as HF
  EXPECT_EQ(c.greater_is_better, "true");
  EXPECT_EQ(eval_interval_steps(load_train_config("", {"--eval_strategy=steps", "--eval_steps=7"})), 7);
  const TrainConfig loss = load_train_config("", {"--metric_for_best_model=eval_loss"});
  EXPECT_EQ(best_model_metric(loss), "loss");
  EXPECT_FALSE(best_metric_greater_is_better(loss));
  const TrainConfig em = load_train_config("", {"--metric_for_best_model=exact_match"});
  EXPECT_TRUE(best_metric_greater_is_better(em));  // HF: only a name ending in loss is lower-better
  EXPECT_FALSE(best_metric_greater_is_better(load_train_config("", {"--metric_for_best_model=exact_match",
                                                                      "--greater_is_better=false"})));
  EXPECT_CONTAINS(override_error({"--greater_is_better=maybe"}), "must be true, false or empty");
  EXPECT_CONTAINS(override_error({"--eval_strategy=always"}), "must be one of no, steps, epoch");
}

TEST(ConfigEvalKeys, TheBestModelNeedsEvaluationsAndCheckpointsAtThem) {
  EXPECT_CONTAINS(override_error({"--load_best_model_at_end=true"}), "set eval_strategy to steps or epoch");
  EXPECT_CONTAINS(override_error({"--early_stopping_patience=3"}), "set eval_strategy to steps or epoch");
  EXPECT_CONTAINS(override_error({"--save_strategy=best"}), "set eval_strategy to steps or epoch");
  EXPECT_CONTAINS(override_error({"--eval_strategy=steps", "--eval_steps=10", "--save_steps=15",
                                  "--load_best_model_at_end=true"}),
                  "save_steps must be a round multiple of eval_steps (10)");
  EXPECT_CONTAINS(override_error({"--eval_strategy=steps", "--load_best_model_at_end=true"}),
                  "save_steps must be a round multiple");  // save_steps 0: only the end
  EXPECT_CONTAINS(override_error({"--eval_strategy=steps", "--save_strategy=epoch", "--load_best_model_at_end=true"}),
                  "save_strategy must be eval_strategy's (or best)");
  EXPECT_NO_THROW(load_train_config("", {"--eval_strategy=steps", "--eval_steps=10", "--save_steps=20",
                                         "--load_best_model_at_end=true", "--early_stopping_patience=2"}));
  EXPECT_NO_THROW(load_train_config("", {"--eval_strategy=epoch", "--save_strategy=best",
                                         "--load_best_model_at_end=true"}));
  EXPECT_CONTAINS(override_error({"--eval_strategy=steps", "--save_strategy=best", "--metric_for_best_model=exact_match"}),
                  "metric_for_best_model exact_match needs eval_generate: true");
}

TEST(ConfigEvalKeys, TheEvalSetComesFromOnePlace) {
  EXPECT_CONTAINS(override_error({"--val_set_size=2.5"}), "val_set_size is a fraction below 1 or a whole number");
  EXPECT_CONTAINS(override_error({"--val_set_size=0.1", "--eval_dataset_path=x.jsonl"}),
                  "val_set_size and eval_dataset_path both give the eval set; give one");
  EXPECT_CONTAINS(override_error({"--eval_strategy=steps", "--eval_dataset_path=", "--do_eval=false"}),
                  "evaluation needs an eval set");
  EXPECT_CONTAINS(override_error({"--val_set_size=0.1", "--eval_strategy=steps", "--eval_generate=true"}),
                  "eval_generate needs conversations to prompt with");
  EXPECT_NO_THROW(load_train_config("", {"--val_set_size=0.1", "--eval_strategy=steps"}));  // default eval file not set
  EXPECT_NO_THROW(load_train_config("", {"--val_set_size=100", "--eval_dataset_path=", "--do_eval=true"}));
}

TEST(ConfigEvalKeys, KeysWithoutTheirFeatureAreWarnedAbout) {
  const auto off = ineffective_keys(load_train_config("", {"--eval_steps=5", "--early_stopping_threshold=0.1",
                                                           "--metric_for_best_model=loss"}));
  ASSERT_EQ(off.size(), 3u);
  EXPECT_CONTAINS(off[0], "--eval_steps: eval_steps = 5 has no effect: it applies only with eval_strategy: steps");
  EXPECT_CONTAINS(off[1], "metric_for_best_model = loss has no effect: no best checkpoint is judged");
  EXPECT_CONTAINS(off[2], "early_stopping_threshold = 0.1 has no effect: early_stopping_patience is 0");
}

}  // namespace
}  // namespace shardft

namespace shardft {
namespace {

// bf16: auto (axolotl's): decided per device at start, and the decision recorded where the key came from.
TEST(ConfigBf16Auto, DecidedForTheDevice) {
  TrainConfig cfg = load_train_config("", {"--bf16=auto"});
  EXPECT_TRUE(cfg.bf16_auto);
  EXPECT_FALSE(cfg.bf16);
  resolve_bf16_auto(cfg, true, "NVIDIA H100 (sm_90) has bf16 tensor cores");
  EXPECT_TRUE(cfg.bf16);
  EXPECT_FALSE(cfg.bf16_auto);
  EXPECT_EQ(source_of(cfg, "bf16"), "--bf16, auto: NVIDIA H100 (sm_90) has bf16 tensor cores");
  TrainConfig cpu = load_train_config("", {"--bf16=AUTO"});
  resolve_bf16_auto(cpu, false, "the host CPU");
  EXPECT_FALSE(cpu.bf16);
  TrainConfig half = load_train_config("", {"--bf16=auto", "--fp16=true"});  // fp16 wins: one compute dtype
  resolve_bf16_auto(half, true, "a GPU");
  EXPECT_FALSE(half.bf16);
  EXPECT_EQ(source_of(half, "bf16"), "--bf16, auto: fp16 is on");
  TrainConfig fixed = load_train_config("", {"--bf16=true"});
  resolve_bf16_auto(fixed, false, "ignored: bf16 was not auto");
  EXPECT_TRUE(fixed.bf16);
  EXPECT_CONTAINS(override_error({"--bf16=maybe"}), "key 'bf16' expects true, false or auto");
}

}  // namespace
}  // namespace shardft
