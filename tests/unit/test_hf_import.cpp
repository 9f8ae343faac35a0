// Fine-tuning from an HF model directory: config.json read as the model's shape, weights read by name
// from model.safetensors or a sharded index (F32 and BF16), and the loss on a fixed batch equal to
// what transformers computes (tests/reference/make_hf_models.py wrote the models and the losses).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <filesystem>
#include <functional>
#include <set>
#include <unistd.h>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/common/self_communicator.hpp"
#include "config/hf_model_config.hpp"
#include "tests/common/hf_fixture_batch.hpp"
#include "io/hf_weights.hpp"
#include "io/safetensors.hpp"
#include "kernels/device_traffic.hpp"
#include "infer/pretrained.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {
namespace fs = std::filesystem;

double rel_diff(double a, double b) { return std::abs(a - b) / std::abs(b); }

const std::string& kHfDir = testing_util::hf_fixture_dir();

nlohmann::json fixture_batch(const std::string& model) { return testing_util::hf_fixture(model); }
using testing_util::hf_fixture_batch;

double shardft_loss(const std::string& model, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> flags = {"--model_name_or_path=" + kHfDir + "/" + model};
  flags.insert(flags.end(), extra.begin(), extra.end());
  const TrainConfig cfg = load_train_config("", flags);
  Trainer tr(cfg, 1, self());
  const LossSums ls = tr.model().forward_loss(to_model_inputs(hf_fixture_batch(fixture_batch(model))), tr.engine());
  return ls.loss_sum / static_cast<double>(ls.num_targets);
}

TEST(HfImport, ReadsQwen2AndLlamaConfigs) {
  const HfModelConfig q = read_hf_model_config(kHfDir + "/tiny_qwen2");
  EXPECT_EQ(q.model_type, "qwen2");
  EXPECT_TRUE(q.model.qkv_bias);
  EXPECT_FALSE(q.model.o_bias);
  EXPECT_TRUE(q.model.tie_word_embeddings);
  EXPECT_EQ(q.model.hidden_size, 32);
  EXPECT_EQ(q.model.num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(q.model.rope_theta, 1e6);
  const HfModelConfig l = read_hf_model_config(kHfDir + "/tiny_llama");
  EXPECT_EQ(l.model_type, "llama");
  EXPECT_FALSE(l.model.qkv_bias);
  EXPECT_FALSE(l.model.tie_word_embeddings);
  EXPECT_EQ(l.model.num_key_value_heads, 1);
  EXPECT_EQ(l.model.intermediate_size, 80);
  const HfModelConfig m = read_hf_model_config(kHfDir + "/tiny_mistral");
  EXPECT_EQ(m.model_type, "mistral");
  EXPECT_EQ(m.sliding_window, 64);
  EXPECT_FALSE(m.model.qkv_bias);
  // Mistral's sliding window is a limit on max_seq_length (the decoder attends to the whole row).
  EXPECT_NO_THROW(load_train_config("", {"--model_name_or_path=" + kHfDir + "/tiny_mistral", "--max_seq_length=64"}));
  EXPECT_THROW(load_train_config("", {"--model_name_or_path=" + kHfDir + "/tiny_mistral", "--max_seq_length=65"}),
               ConfigError);
}

TEST(HfImport, LossOnFixedBatchMatchesTransformers) {
  for (const std::string model : {"tiny_qwen2", "tiny_llama", "tiny_mistral"}) {
    SCOPED_TRACE(model);
    const double expected = fixture_batch(model).at("loss").get<double>();
    EXPECT_LT(rel_diff(shardft_loss(model), expected), 1e-4);
    // The other attention kernel, recomputation and chunked logits compute the same loss.
    EXPECT_LT(rel_diff(shardft_loss(model, {"--attn_implementation=memory_efficient", "--gradient_checkpointing",
                                            "--logits_chunk_tokens=5"}),
                       expected),
              1e-4);
  }
}

TEST(HfImport, ShardedIndexReadsEveryTensorFromItsFile) {
  HfModelWeights w(kHfDir + "/tiny_llama");
  EXPECT_NE(w.description().find("model.safetensors.index.json"), std::string::npos);
  std::ifstream in(kHfDir + "/tiny_llama/model.safetensors.index.json");
  const auto map = nlohmann::json::parse(in).at("weight_map");
  EXPECT_EQ(w.names().size(), map.size());
  std::set<std::string> files;
  for (auto it = map.begin(); it != map.end(); ++it) files.insert(it.value().get<std::string>());
  EXPECT_GT(files.size(), 1u) << "the fixture should really be sharded";
  // A slice equals the same elements of the whole tensor.
  const auto& shape = w.shape("model.layers.1.mlp.down_proj.weight");
  const std::int64_t n = shape[0] * shape[1];
  std::vector<float> all(n), part(7);
  w.read("model.layers.1.mlp.down_proj.weight", 0, n, all.data());
  w.read("model.layers.1.mlp.down_proj.weight", 100, 7, part.data());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(part[i], all[100 + i]);
  EXPECT_THROW(w.read("model.layers.1.mlp.down_proj.weight", n - 3, 7, part.data()), FormatError);
}

// ---- bad model directories ------------------------------------------------------------------------

class HfBadDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("shardft_hf_bad_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::copy(kHfDir + "/tiny_qwen2", dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void edit_config(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json c = nlohmann::json::parse(std::ifstream(dir_ / "config.json"));
    edit(c);
    std::ofstream(dir_ / "config.json") << c.dump();
  }
  // The message of the first error loading the model (config, then weights), or "".
  std::string load_error() {
    try {
      const TrainConfig cfg = load_train_config("", {"--model_name_or_path=" + dir_.string()});
      Trainer tr(cfg, 1, self());
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

#define EXPECT_ERROR_HAS(text)                                                     \
  do {                                                                             \
    const std::string msg = load_error();                                          \
    EXPECT_NE(msg.find(text), std::string::npos) << "message: \"" << msg << "\""; \
  } while (0)

TEST_F(HfBadDir, UnsupportedArchitectureNamesTheKey) {
  edit_config([](nlohmann::json& c) { c["model_type"] = "gpt2"; });
  EXPECT_ERROR_HAS("config.json: model_type: \"gpt2\" is not supported (expected llama, qwen2, qwen3 or mistral)");
}

TEST_F(HfBadDir, UnsupportedFeaturesNameTheKey) {
  edit_config([](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}}; });
  EXPECT_ERROR_HAS("config.json: rope_scaling.low_freq_factor: missing (expected a number > 0)");
  edit_config([](nlohmann::json& c) { c["rope_scaling"] = {{"type", "longrope"}, {"factor", 8.0}}; });
  EXPECT_ERROR_HAS("config.json: rope_scaling.type: \"longrope\" is not supported (expected default, linear, "
                   "dynamic, yarn or llama3)");
  edit_config([](nlohmann::json& c) { c["rope_scaling"] = nullptr; c["partial_rotary_factor"] = 0.5; });
  EXPECT_ERROR_HAS("config.json: partial_rotary_factor: 0.5 is not supported");
  edit_config([](nlohmann::json& c) { c.erase("partial_rotary_factor"); c["rope_scaling"] = nullptr; });
  edit_config([](nlohmann::json& c) { c["hidden_act"] = "gelu"; });
  EXPECT_ERROR_HAS("config.json: hidden_act: \"gelu\" is not supported");
  edit_config([](nlohmann::json& c) { c["hidden_act"] = "silu"; c["head_dim"] = 0; });
  EXPECT_ERROR_HAS("config.json: head_dim: expected a positive integer, got 0");
  edit_config([](nlohmann::json& c) { c["head_dim"] = 7; });
  EXPECT_ERROR_HAS("config.json: head_dim: is 7; it must be even (RoPE rotates pairs)");
  edit_config([](nlohmann::json& c) { c["head_dim"] = "8"; });
  EXPECT_ERROR_HAS("config.json: head_dim: expected a positive integer, got \"8\"");
  // Another head_dim is a model of other shapes: the weights say it is not this one.
  edit_config([](nlohmann::json& c) { c["head_dim"] = 16; });
  EXPECT_ERROR_HAS("tensor 'model.layers.0.self_attn.q_proj.weight' has shape [32, 32], config.json implies [64, 32]");
  edit_config([](nlohmann::json& c) { c.erase("head_dim"); c.erase("hidden_size"); });
  EXPECT_ERROR_HAS("config.json: hidden_size: missing (expected a positive integer)");
  edit_config([](nlohmann::json& c) { c["hidden_size"] = "32"; });
  EXPECT_ERROR_HAS("config.json: hidden_size: expected a positive integer, got \"32\"");
}

TEST_F(HfBadDir, SlidingWindowShorterThanTheSequenceIsRefused) {
  edit_config([](nlohmann::json& c) { c["use_sliding_window"] = true; c["sliding_window"] = 32; });
  try {
    load_train_config("", {"--model_name_or_path=" + dir_.string(), "--max_seq_length=64"});
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the sliding_window 32"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(load_train_config("", {"--model_name_or_path=" + dir_.string(), "--max_seq_length=32"}));
}

TEST_F(HfBadDir, ShapeKeysBesideAModelDirectoryAreRefused) {
  try {
    load_train_config("", {"--model_name_or_path=" + dir_.string(), "--hidden_size=64"});
    ADD_FAILURE() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--hidden_size: hidden_size comes from model_name_or_path's config.json"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(HfBadDir, Qwen3WithoutItsNormTensorsNamesTheTensor) {
  edit_config([](nlohmann::json& c) {
    c["model_type"] = "qwen3";
    c["architectures"] = {"Qwen3ForCausalLM"};
  });
  EXPECT_ERROR_HAS("model.safetensors: no tensor 'model.layers.0.self_attn.q_norm.weight' (the model's config.json needs it)");
  edit_config([](nlohmann::json& c) { c["use_sliding_window"] = true; c["sliding_window"] = 8; });
  EXPECT_ERROR_HAS("longer than the sliding_window 8");
}

TEST_F(HfBadDir, MissingOrMisshapenTensorNamesTheTensor) {
  edit_config([](nlohmann::json& c) { c["tie_word_embeddings"] = false; });  // now lm_head.weight is needed
  EXPECT_ERROR_HAS("model.safetensors: no tensor 'lm_head.weight'");
  edit_config([](nlohmann::json& c) { c["tie_word_embeddings"] = true; c["intermediate_size"] = 96; });
  EXPECT_ERROR_HAS("tensor 'model.layers.0.mlp.gate_proj.weight' has shape [64, 32], config.json implies [96, 32]");
}

TEST_F(HfBadDir, MissingWeightsAndBrokenIndexAreNamed) {
  fs::remove(dir_ / "model.safetensors");
  EXPECT_ERROR_HAS("has neither model.safetensors nor model.safetensors.index.json");
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"weight_map": {"model.norm.weight": "gone.safetensors"}})";
  EXPECT_ERROR_HAS("model.safetensors.index.json: weight_map[\"model.norm.weight\"] names");
  std::ofstream(dir_ / "model.safetensors.index.json") << R"({"metadata": {}})";
  EXPECT_ERROR_HAS("model.safetensors.index.json: expected an object with a \"weight_map\" object");
}

TEST_F(HfBadDir, SafetensorsWhoseHeaderLiesIsRefused) {
  // Shrink the file by a few bytes: the last tensor's data_offsets now point past the end.
  const auto path = dir_ / "model.safetensors";
  fs::resize_file(path, fs::file_size(path) - 16);
  EXPECT_ERROR_HAS("model.safetensors: tensor '");
  EXPECT_ERROR_HAS("data_offsets out of bounds");
}

// A config.json with fewer layers than the weights would fine-tune part of the model and drop the rest.
TEST_F(HfBadDir, TensorsWithNoParameterAreRefusedNamingThem) {
  edit_config([](nlohmann::json& c) { c["num_hidden_layers"] = 1; });
  EXPECT_ERROR_HAS("tensor(s) the model of config.json has no parameter for: 'model.layers.1.");
  EXPECT_ERROR_HAS("does num_hidden_layers");
}

// Old exports carry RoPE's inv_freq buffers and some tied models an lm_head.weight: left out, and said so.
TEST_F(HfBadDir, RopeBuffersAndATiedHeadAreLeftOutAndListed) {
  HfModelWeights w(dir_.string());
  std::vector<std::vector<float>> data;
  std::vector<std::string> names = w.names();
  for (const std::string& n : names) {
    const auto& shape = w.shape(n);
    std::int64_t numel = 1;
    for (std::int64_t d : shape) numel *= d;
    data.emplace_back(numel);
    w.read(n, 0, numel, data.back().data());
  }
  std::vector<NamedTensorRef> tensors;
  for (std::size_t i = 0; i < names.size(); ++i) tensors.push_back({names[i], w.shape(names[i]), data[i].data()});
  const std::vector<float> inv_freq(4, 1.f);
  const auto& embed_shape = w.shape("model.embed_tokens.weight");
  const std::vector<float> head(static_cast<std::size_t>(embed_shape[0] * embed_shape[1]), 0.f);
  tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {4}, inv_freq.data()});
  tensors.push_back({"lm_head.weight", embed_shape, head.data()});
  write_safetensors_f32((dir_ / "model.safetensors").string(), tensors);
  const TrainConfig cfg = load_train_config("", {"--model_name_or_path=" + dir_.string()});
  Trainer tr(cfg, 1, self());
  ASSERT_EQ(tr.ignored_weights().size(), 2u);
  EXPECT_NE(tr.ignored_weights()[0].find("lm_head.weight (tie_word_embeddings"), std::string::npos);
  EXPECT_NE(tr.ignored_weights()[1].find("rotary_emb.inv_freq (RoPE's frequencies"), std::string::npos);
}

// A NaN or Inf in the weights would train with loss NaN from the first step: refused at load, naming
// the tensor and the element.
TEST_F(HfBadDir, NonFiniteWeightsAreRefusedNamingTheTensor) {
  for (const float bad : {std::nanf(""), -std::numeric_limits<float>::infinity()}) {
    fs::remove_all(dir_);
    fs::copy(kHfDir + "/tiny_qwen2", dir_);
    HfModelWeights w(dir_.string());
    const std::vector<std::string> names = w.names();
    std::vector<std::vector<float>> data;
    std::vector<NamedTensorRef> tensors;
    for (const std::string& n : names) {
      std::int64_t numel = 1;
      for (std::int64_t d : w.shape(n)) numel *= d;
      data.emplace_back(numel);
      w.read(n, 0, numel, data.back().data());
    }
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == "model.layers.1.mlp.up_proj.weight") data[i][37] = bad;
      tensors.push_back({names[i], w.shape(names[i]), data[i].data()});
    }
    write_safetensors_f32((dir_ / "model.safetensors").string(), tensors);
    EXPECT_ERROR_HAS("tensor 'model.layers.1.mlp.up_proj.weight' holds " + std::string(std::isnan(bad) ? "NaN" : "Inf") +
                     " at flat element 37 of its [");
  }
}

// config.json alone, for a model far larger than this machine: the missing weights are the error, found
// before the model's weights, gradients and optimizer state are allocated.
TEST_F(HfBadDir, MissingWeightsAreFoundBeforeTheModelStateIsAllocated) {
  fs::remove(dir_ / "model.safetensors");
  edit_config([](nlohmann::json& c) {
    c["hidden_size"] = 8192;
    c["intermediate_size"] = 28672;
    c["num_hidden_layers"] = 80;
    c["num_attention_heads"] = 64;
    c["num_key_value_heads"] = 8;
    c["vocab_size"] = 128256;
  });
  install_device_traffic_hooks();
  const std::int64_t before = device_peak_bytes();
  EXPECT_ERROR_HAS("has neither model.safetensors nor model.safetensors.index.json");
  EXPECT_LT(device_peak_bytes() - before, std::int64_t{64} << 20) << "the 70B model's state was allocated first";
}

TEST_F(HfBadDir, AQuantizedCheckpointIsRefusedAtItsConfig) {
  edit_config([](nlohmann::json& c) { c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}}; });
  EXPECT_ERROR_HAS("config.json: quantization_config: a quantized checkpoint (quant_method \"gptq\") is not supported");
}

}  // namespace
}  // namespace shardft
