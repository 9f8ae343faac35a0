// The decoder against PyTorch: loss and every parameter's gradient from the fixtures written by
// tests/reference/make_fixtures.py (HF Llama math, fp32; Qwen2's q/k/v biases and Llama's
// attention_bias too), on every attention path, and the whole model's gradient against central
// finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "tests/common/relative_difference.hpp"
#include "model/decoder.hpp"
#include "finite_difference.hpp"
#include "reference_fixture.hpp"

namespace shardft {
namespace {
using testing_util::rel_diff;

ModelConfig config_from(const nlohmann::json& j) {
  ModelConfig c;
  c.vocab_size = j.at("vocab_size");
  c.hidden_size = j.at("hidden_size");
  c.num_hidden_layers = j.at("num_hidden_layers");
  c.num_attention_heads = j.at("num_attention_heads");
  c.num_key_value_heads = j.at("num_key_value_heads");
  c.intermediate_size = j.at("intermediate_size");
  c.rope_theta = j.at("rope_theta");
  c.rms_norm_eps = j.at("rms_norm_eps");
  c.tie_word_embeddings = j.at("tie_word_embeddings");
  c.qkv_bias = j.value("qkv_bias", false);  // only the bias fixtures name them
  c.o_bias = j.value("o_bias", false);
  c.max_position_embeddings = j.at("max_position_embeddings");
  return c;
}

std::vector<float> to_host(Unmanaged1<const float> v) {
  std::vector<float> out(v.extent(0));
  Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> dst(out.data(), out.size());
  Kokkos::deep_copy(dst, v);
  return out;
}

void load_weights(const ReferenceFixture& fx, const ParamLayout& layout, LocalParams& params) {
  ASSERT_EQ(fx.weights.size(), layout.params().size());
  auto host = Kokkos::create_mirror_view(params.weights());
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const auto& w = fx.weights.at(layout.params()[p].name);
    ASSERT_EQ(static_cast<std::int64_t>(w.size()), layout.params()[p].numel()) << layout.params()[p].name;
    std::copy(w.begin(), w.end(), host.data() + layout.offset(static_cast<int>(p)));
  }
  Kokkos::deep_copy(params.weights(), host);
}

// The ways the decoder can compute one step; each must match PyTorch on its own.
enum class Path { eager, eager_checkpointed, memory_efficient, memory_efficient_checkpointed };
const char* path_name(Path p) {
  switch (p) {
    case Path::eager: return "eager";
    case Path::eager_checkpointed: return "eager_checkpointed";
    case Path::memory_efficient: return "memory_efficient";
    case Path::memory_efficient_checkpointed: return "memory_efficient_checkpointed";
  }
  return "?";
}
void PrintTo(Path p, std::ostream* os) { *os << path_name(p); }

const char* const kFixtures[] = {"tiny_gqa_untied", "tiny_mha_tied", "tiny_qwen2_bias", "tiny_llama_attn_bias"};

class ModelReference : public ::testing::TestWithParam<std::tuple<const char*, Path>> {};

TEST_P(ModelReference, LossAndEveryGradientMatchPyTorch) {
  const auto [fixture, path] = GetParam();
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, fixture);
  const ModelConfig cfg = config_from(fx.config);
  Decoder model(cfg, ComputeDtype::fp32);
  model.set_memory_efficient_attention(path == Path::memory_efficient || path == Path::memory_efficient_checkpointed);
  model.set_activation_checkpointing(path == Path::eager_checkpointed || path == Path::memory_efficient_checkpointed);
  LocalParams params(model.layout());
  load_weights(fx, model.layout(), params);
  Kokkos::deep_copy(params.grads(), 0.f);
  const ModelInputs in = upload_inputs(fx.batch, fx.seq, fx.input_ids, fx.position_ids, fx.seq_ids, fx.targets);

  const LossSums sums = model.forward_backward(in, params, params, static_cast<double>(fx.num_targets));
  EXPECT_EQ(sums.num_targets, fx.num_targets);
  const double loss = sums.loss_sum / sums.num_targets;
  EXPECT_NEAR(loss, fx.loss, 1e-5 * std::abs(fx.loss));

  for (std::size_t p = 0; p < model.layout().params().size(); ++p) {
    const std::string& name = model.layout().params()[p].name;
    const std::vector<float> got = to_host(params.grad(static_cast<int>(p)));
    const std::vector<float>& want = fx.grads.at(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    EXPECT_LT(rel_diff(got, want), 1e-4) << name;
    double max_ref = 0;
    for (float w : want) max_ref = std::max(max_ref, double(std::abs(w)));
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4 * max_ref + 1e-7) << name << "[" << i << "]";
    }
  }

  // forward_loss agrees with the loss of forward_backward
  const LossSums fwd = model.forward_loss(in, params);
  EXPECT_NEAR(fwd.loss_sum, sums.loss_sum, 1e-6 * std::abs(sums.loss_sum));

  // forward_logits of row 0 matches PyTorch's logits
  View1<std::int32_t> rows("rows", fx.seq);
  auto rows_h = Kokkos::create_mirror_view(rows);
  for (int t = 0; t < fx.seq; ++t) rows_h(t) = t;
  Kokkos::deep_copy(rows, rows_h);
  View2<float> logits("logits", fx.seq, cfg.vocab_size);
  model.forward_logits(in, params, rows, logits);
  const std::vector<float> got_logits = to_host(Unmanaged1<const float>(logits.data(), logits.size()));
  EXPECT_LT(rel_diff(got_logits, fx.logits_row0), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelReference,
                         ::testing::Combine(::testing::ValuesIn(kFixtures),
                                            ::testing::Values(Path::eager, Path::eager_checkpointed,
                                                              Path::memory_efficient,
                                                              Path::memory_efficient_checkpointed)),
                         [](const ::testing::TestParamInfo<ModelReference::ParamType>& info) {
                           return std::string(std::get<0>(info.param)) + "_" + path_name(std::get<1>(info.param));
                         });

// The bias fixtures hold exactly the parameters HF's state_dict has, in its order: each bias right
// after its weight, q/k/v only for Qwen2, o too for Llama's attention_bias.
TEST(ModelReferenceBias, LayoutHasTheHFBiasesInStateDictOrder) {
  for (const char* name : {"tiny_qwen2_bias", "tiny_llama_attn_bias"}) {
    SCOPED_TRACE(name);
    const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, name);
    const ModelConfig cfg = config_from(fx.config);
    ASSERT_TRUE(cfg.qkv_bias);
    const ParamLayout layout(cfg);
    EXPECT_EQ(layout.params().size(), fx.weights.size());
    for (const ParamSpec& spec : layout.params()) EXPECT_EQ(fx.shapes.at(spec.name), spec.shape) << spec.name;
    for (int l = 0; l < layout.num_layers(); ++l) {
      const LayerParams& P = layout.layer(l);
      const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
      EXPECT_EQ(P.q_bias, P.q_proj + 1);
      EXPECT_EQ(P.k_proj, P.q_bias + 1);
      EXPECT_EQ(layout.params()[P.q_bias].name, p + "q_proj.bias");
      EXPECT_EQ(layout.params()[P.k_bias].name, p + "k_proj.bias");
      EXPECT_EQ(layout.params()[P.v_bias].name, p + "v_proj.bias");
      if (cfg.o_bias) {
        EXPECT_EQ(layout.params()[P.o_bias].name, p + "o_proj.bias");
        EXPECT_EQ(P.o_bias, P.o_proj + 1);
      } else {
        EXPECT_EQ(P.o_bias, -1);
        EXPECT_EQ(layout.index(p + "o_proj.weight") + 1, P.post_attention_layernorm);
      }
    }
  }
}

// Directional derivative of the loss along a random direction in each parameter, against the
// analytic gradient: (L(w + h r) - L(w - h r)) / 2h == g . r.
// On the bias fixture too: every bias is a parameter like the others.
class ModelFiniteDifference : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelFiniteDifference, EveryParameterAlongRandomDirection) {
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, GetParam());
  const ModelConfig cfg = config_from(fx.config);
  Decoder model(cfg, ComputeDtype::fp32);
  LocalParams params(model.layout());
  load_weights(fx, model.layout(), params);
  Kokkos::deep_copy(params.grads(), 0.f);
  const ModelInputs in = upload_inputs(fx.batch, fx.seq, fx.input_ids, fx.position_ids, fx.seq_ids, fx.targets);
  model.forward_backward(in, params, params, 1.0);  // gradient of the summed loss
  const std::vector<float> grad = to_host(params.grads());
  const std::vector<float> w0 = to_host(params.weights());

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto host = Kokkos::create_mirror_view(params.weights());
  const auto& layout = model.layout();
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const std::int64_t off = layout.offset(static_cast<int>(p)), n = layout.params()[p].numel();
    std::vector<float> r(n);
    double gr = 0, rr = 0;
    for (auto& x : r) x = normal(rng);
    for (std::int64_t i = 0; i < n; ++i) rr += double(r[i]) * r[i];
    for (auto& x : r) x = static_cast<float>(x / std::sqrt(rr));
    for (std::int64_t i = 0; i < n; ++i) gr += double(grad[off + i]) * r[i];
    const double h = 1e-2;
    auto loss_at = [&](double t) {
      std::copy(w0.begin(), w0.end(), host.data());
      for (std::int64_t i = 0; i < n; ++i) host(off + i) = static_cast<float>(w0[off + i] + t * r[i]);
      Kokkos::deep_copy(params.weights(), host);
      return model.forward_loss(in, params).loss_sum;
    };
    const double fd = (loss_at(h) - loss_at(-h)) / (2 * h);
    EXPECT_NEAR(fd, gr, 2e-2 * std::abs(gr) + 2e-3) << layout.params()[p].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelFiniteDifference, ::testing::Values("tiny_mha_tied", "tiny_llama_attn_bias"));

// Every entry of every attention bias (q, k, v and o) against central differences of the summed
// loss, one entry at a time, on both attention paths.
TEST(ModelBiasFiniteDifference, EveryAttentionBiasEntry) {
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, "tiny_llama_attn_bias");
  const ModelConfig cfg = config_from(fx.config);
  const ModelInputs in = upload_inputs(fx.batch, fx.seq, fx.input_ids, fx.position_ids, fx.seq_ids, fx.targets);
  for (bool memory_efficient : {false, true}) {
    SCOPED_TRACE(memory_efficient ? "memory_efficient" : "eager");
    Decoder model(cfg, ComputeDtype::fp32);
    model.set_memory_efficient_attention(memory_efficient);
    LocalParams params(model.layout());
    load_weights(fx, model.layout(), params);
    Kokkos::deep_copy(params.grads(), 0.f);
    model.forward_backward(in, params, params, 1.0);  // gradient of the summed loss
    const auto& layout = model.layout();
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), params.weights());
    int biases = 0;
    for (std::size_t p = 0; p < layout.params().size(); ++p) {
      if (!layout.params()[p].is_bias()) continue;
      ++biases;
      const int pi = static_cast<int>(p);
      const std::int64_t off = layout.offset(pi), n = layout.params()[p].numel();
      const std::vector<float> analytic = to_host(params.grad(pi));
      const std::vector<float> b0(host.data() + off, host.data() + off + n);
      auto loss_at = [&](const std::vector<float>& b) {
        std::copy(b.begin(), b.end(), host.data() + off);
        Kokkos::deep_copy(params.weights(), host);
        return model.forward_loss(in, params).loss_sum;
      };
      const std::vector<double> numeric = kernel_test::numeric_gradient(b0, loss_at, 2e-2f);
      loss_at(b0);
      kernel_test::expect_gradient_close(layout.params()[p].name, analytic, numeric, 1e-2, 1e-2, 1e-2);
    }
    EXPECT_EQ(biases, 4 * cfg.num_hidden_layers);
  }
}

}  // namespace
}  // namespace shardft

namespace shardft {
namespace {

// Memory-saving paths compute the same step: activation checkpointing bit for bit, the LM head and
// cross-entropy chunked over tokens to 1e-6 (only the order of the LM-head gradient sum changes), and
// memory-efficient attention to 1e-5 (scores recomputed, softmax normalised online).
class ModelMemoryPaths : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelMemoryPaths, CheckpointingAndChunkedHeadMatchThePlainPath) {
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, GetParam());
  const ModelConfig cfg = config_from(fx.config);
  const ModelInputs in = upload_inputs(fx.batch, fx.seq, fx.input_ids, fx.position_ids, fx.seq_ids, fx.targets);
  auto grads_of = [&](bool checkpointing, std::int64_t chunk, bool lse_attention = false) {
    Decoder model(cfg, ComputeDtype::fp32);
    model.set_activation_checkpointing(checkpointing);
    model.set_memory_efficient_attention(lse_attention);
    model.set_logits_chunk_tokens(chunk);
    LocalParams params(model.layout());
    load_weights(fx, model.layout(), params);
    Kokkos::deep_copy(params.grads(), 0.f);
    const double loss = model.forward_backward(in, params, params, double(fx.num_targets)).loss_sum;
    EXPECT_NEAR(model.forward_loss(in, params).loss_sum, loss, 1e-6 * loss);
    return std::make_pair(loss, to_host(params.grads()));
  };
  const auto plain = grads_of(false, 0);
  const auto ckpt = grads_of(true, 0);
  EXPECT_EQ(ckpt.first, plain.first);
  EXPECT_EQ(ckpt.second, plain.second) << "checkpointing must recompute exactly what forward computed";
  const auto chunked = grads_of(false, 3);  // 14 tokens in chunks of 3, the last one partial
  EXPECT_NEAR(chunked.first, plain.first, 1e-6 * plain.first);
  EXPECT_LT(rel_diff(chunked.second, plain.second), 1e-6);
  const auto both = grads_of(true, 5);
  EXPECT_LT(rel_diff(both.second, plain.second), 1e-6);
  // memory-efficient attention: same math, scores recomputed in another order
  const auto lse = grads_of(true, 4, true);
  EXPECT_NEAR(lse.first, plain.first, 1e-6 * plain.first);
  EXPECT_LT(rel_diff(lse.second, plain.second), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelMemoryPaths,
                         ::testing::Values("tiny_gqa_untied", "tiny_qwen2_bias", "tiny_llama_attn_bias"));

// Every parameter and gradient in a buffer of its own: the gate and up projections are not adjacent, so
// the decoder takes its copy / scratch path for the fused gate-up GEMM. Same step, bit for bit.
class ScatteredParams : public ParamSource, public GradSink {
 public:
  explicit ScatteredParams(const LocalParams& flat) {
    const ParamLayout& layout = flat.layout();
    for (std::size_t p = 0; p < layout.params().size(); ++p) {
      const std::int64_t n = layout.params()[p].numel();
      weights_.emplace_back("w", n);
      grads_.emplace_back("g", n);
      Kokkos::deep_copy(weights_.back(), Unmanaged1<const float>(flat.weights().data() + layout.offset(p), n));
    }
  }
  void acquire(int, Pass) override {}
  Unmanaged1<const float> weight(int p) override { return Unmanaged1<const float>(weights_[p].data(), weights_[p].extent(0)); }
  void release(int, Pass) override {}
  Unmanaged1<float> grad(int p) override { return Unmanaged1<float>(grads_[p].data(), grads_[p].extent(0)); }
  void block_done(int) override {}
  std::vector<float> flat_grads() const {
    std::vector<float> out;
    for (const auto& g : grads_) {
      const auto h = to_host(g);
      out.insert(out.end(), h.begin(), h.end());
    }
    return out;
  }

 private:
  std::vector<View1<float>> weights_, grads_;
};

TEST(ModelMemoryPaths, GateAndUpStoredApartGiveTheSameStep) {
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, "tiny_gqa_untied");
  const ModelConfig cfg = config_from(fx.config);
  const ModelInputs in = upload_inputs(fx.batch, fx.seq, fx.input_ids, fx.position_ids, fx.seq_ids, fx.targets);
  Decoder model(cfg, ComputeDtype::fp32);
  LocalParams flat(model.layout());
  load_weights(fx, model.layout(), flat);
  Kokkos::deep_copy(flat.grads(), 0.f);
  ScatteredParams scattered(flat);
  const double loss_flat = model.forward_backward(in, flat, flat, double(fx.num_targets)).loss_sum;
  const double loss_scattered = model.forward_backward(in, scattered, scattered, double(fx.num_targets)).loss_sum;
  EXPECT_EQ(loss_scattered, loss_flat);
  EXPECT_EQ(scattered.flat_grads(), to_host(flat.grads()));
}

}  // namespace
}  // namespace shardft
