// Attention biases beyond the decoder's math (which test_model_reference.cpp checks against PyTorch):
// the bias kernels, zero initialisation, no weight decay, the sharding engine training them like any
// parameter, and a checkpoint of a biased model consolidating to the HF architecture that has those
// biases (Qwen2: q/k/v; Llama attention_bias: q/k/v/o).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "config/recipe_sections.hpp"
#include "tests/common/self_communicator.hpp"
#include "finite_difference.hpp"
#include "io/safetensors.hpp"
#include "kernels/bias.hpp"
#include "model/decoder.hpp"
#include "parallel/zero_engine.hpp"
#include "train/checkpoint.hpp"
#include "tools/consolidate.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {
using namespace kernel_test;

ModelConfig biased_model(bool qkv, bool o) {
  ModelConfig m;
  m.vocab_size = 272;
  m.hidden_size = 32;
  m.num_hidden_layers = 2;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 2;
  m.intermediate_size = 48;
  m.qkv_bias = qkv;
  m.o_bias = o;
  return m;
}

TEST(BiasKernels, ForwardAddsEachColumnsBiasAndBackwardSumsOverRows) {
  const std::size_t N = 5, out = 3;
  const std::vector<float> y0 = random_vector(N * out, 1), b = random_vector(out, 2);
  auto y = to_device(y0, N, out, "y");
  bias_forward(Unmanaged2<float>(y.data(), N, out), Unmanaged1<const float>(to_device(b).data(), out));
  const std::vector<float> got = to_host(y);
  for (std::size_t n = 0; n < N; ++n)
    for (std::size_t j = 0; j < out; ++j) EXPECT_FLOAT_EQ(got[n * out + j], y0[n * out + j] + b[j]);

  const std::vector<float> dy = random_vector(N * out, 3), db0 = random_vector(out, 4);
  auto db = to_device(db0, "db");
  bias_backward(Unmanaged2<const float>(to_device(dy, N, out, "dy").data(), N, out), Unmanaged1<float>(db.data(), out));
  const std::vector<float> dbh = to_host(db);
  for (std::size_t j = 0; j < out; ++j) {
    double s = db0[j];  // adds into db
    for (std::size_t n = 0; n < N; ++n) s += dy[n * out + j];
    EXPECT_NEAR(dbh[j], s, 1e-6);
  }
  EXPECT_THROW(bias_forward(Unmanaged2<float>(y.data(), N, out), Unmanaged1<const float>(to_device(dy).data(), 2)),
               std::invalid_argument);
}

TEST(BiasLayout, BiasesAreTheirOwnKindInitialisedToZero) {
  const ModelConfig m = biased_model(true, true);
  const ParamLayout layout(m);
  View1<float> flat("flat", layout.total_numel());
  init_params(layout, m, 5, flat);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), flat);
  int biases = 0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    const bool named_bias = spec.name.size() > 5 && spec.name.compare(spec.name.size() - 5, 5, ".bias") == 0;
    EXPECT_EQ(spec.is_bias(), named_bias) << spec.name;
    EXPECT_FALSE(spec.is_bias() && spec.is_norm()) << spec.name;
    EXPECT_EQ(spec.takes_weight_decay(), !spec.is_bias() && !spec.is_norm()) << spec.name;
    if (!spec.is_bias()) continue;
    ++biases;
    for (std::int64_t i = 0; i < spec.numel(); ++i) ASSERT_EQ(host(layout.offset(static_cast<int>(p)) + i), 0.f) << spec.name;
  }
  EXPECT_EQ(biases, 4 * m.num_hidden_layers);
  // Every layer block holds its biases; the parameter count is the matrices' plus the biases'.
  const std::int64_t d = m.hidden_size, q = m.num_attention_heads * m.head_dim(), kv = m.num_key_value_heads * m.head_dim();
  EXPECT_EQ(layout.total_numel() - ParamLayout(biased_model(false, false)).total_numel(),
            m.num_hidden_layers * (q + 2 * kv + d));
  for (int l = 0; l < layout.num_layers(); ++l) {
    const auto& block = layout.blocks()[l + 1].params;
    for (int b : {layout.layer(l).q_bias, layout.layer(l).k_bias, layout.layer(l).v_bias, layout.layer(l).o_bias}) {
      EXPECT_NE(std::find(block.begin(), block.end(), b), block.end());
    }
  }
  const ParamLayout qwen2(biased_model(true, false));
  EXPECT_EQ(qwen2.layer(0).o_bias, -1);
  EXPECT_THROW(qwen2.index("model.layers.0.self_attn.o_proj.bias"), std::out_of_range);
}

// HF Trainer's rule: no weight decay on biases (nor on norm weights). With a zero gradient AdamW moves
// nothing but the decay: matrices shrink by lr * weight_decay, biases and norms stay.
TEST(BiasTraining, BiasesTakeNoWeightDecay) {
  const ParamLayout layout(biased_model(true, true));
  ZeroConfig zc;
  zc.weight_decay = 0.5;
  for (int stage : {0, 1}) {
    SCOPED_TRACE(stage);
    zc.stage = stage;
    ZeroEngine eng(layout, zc, ParallelPlan::over(self()));
    eng.load_weights(std::vector<float>(layout.total_numel(), 1.f));
    eng.begin_step();
    eng.begin_micro_batch({0, 1});
    eng.end_micro_batch();
    eng.optimizer_step(0.1);
    const std::vector<float> w = eng.gather_master();
    for (std::size_t p = 0; p < layout.params().size(); ++p) {
      const ParamSpec& spec = layout.params()[p];
      const float want = spec.takes_weight_decay() ? 1.f - 0.1f * 0.5f : 1.f;
      EXPECT_FLOAT_EQ(w[layout.offset(static_cast<int>(p))], want) << spec.name;
    }
  }
}

class BiasExport : public ::testing::TestWithParam<bool> {  // o_bias: Llama attention_bias; else Qwen2
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("shardft_bias_export_" + std::to_string(GetParam()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// A trained biased model survives checkpoint -> consolidate with its biases trained (nonzero) and a
// config.json naming the architecture that has them.
TEST_P(BiasExport, ConsolidatedConfigNamesTheArchitecture) {
  const bool o_bias = GetParam();
  TrainConfig cfg;
  cfg.model = biased_model(true, o_bias);
  cfg.output_dir = (dir_ / "run").string();
  cfg.learning_rate = 1e-2;
  cfg.zero_stage = 3;
  Trainer tr(cfg, 2, self());  // biases start at zero
  TokenBatch batch;
  batch.batch = 1;
  batch.seq = 8;
  batch.input_ids = {257, 65, 66, 67, 68, 69, 70, 258};
  batch.position_ids = {0, 1, 2, 3, 4, 5, 6, 7};
  batch.seq_ids = std::vector<std::int32_t>(8, 0);
  batch.targets = {65, 66, 67, 68, 69, 70, 258, -100};
  tr.step({batch});
  std::filesystem::create_directories(cfg.output_dir);
  const std::string ckpt = save_checkpoint(checkpoint_config(cfg), tr, {1, 0.0, ""});
  ConsolidateOptions opt;
  opt.output_dir = (dir_ / "hf").string();
  consolidate_checkpoint(ckpt, opt, std::cerr);

  const nlohmann::json c = nlohmann::json::parse(std::ifstream(dir_ / "hf" / "config.json"));
  EXPECT_FALSE(c.contains("qkv_bias")) << "shardft's flags are not HF keys";
  EXPECT_FALSE(c.contains("o_bias"));
  if (o_bias) {
    EXPECT_EQ(c.at("architectures"), nlohmann::json::array({"LlamaForCausalLM"}));
    EXPECT_EQ(c.at("model_type"), "llama");
    EXPECT_EQ(c.at("attention_bias"), true);
  } else {
    EXPECT_EQ(c.at("architectures"), nlohmann::json::array({"Qwen2ForCausalLM"}));
    EXPECT_EQ(c.at("model_type"), "qwen2");
  }
  const auto tensors = read_safetensors_f32((dir_ / "hf" / "model.safetensors").string());
  for (const char* proj : {"q", "k", "v", "o"}) {
    const std::string name = std::string("model.layers.1.self_attn.") + proj + "_proj.bias";
    if (std::string(proj) == "o" && !o_bias) {
      EXPECT_EQ(tensors.count(name), 0u) << name;
      continue;
    }
    ASSERT_EQ(tensors.count(name), 1u) << name;
    float max_abs = 0.f;
    for (float x : tensors.at(name).data) max_abs = std::max(max_abs, std::abs(x));
    EXPECT_GT(max_abs, 0.f) << name << " was not trained";
  }
}

INSTANTIATE_TEST_SUITE_P(QwenAndLlama, BiasExport, ::testing::Values(false, true));

}  // namespace
}  // namespace shardft
