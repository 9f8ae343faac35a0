// The decoder against PyTorch: loss and every parameter's gradient from the fixtures written by
// tests/reference/make_fixtures.py (HF Llama math, fp32), and the whole model's gradient against
// central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/common/relative_difference.hpp"
#include "model/decoder.hpp"
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

class ModelReference : public ::testing::TestWithParam<const char*> {};

TEST_P(ModelReference, LossAndEveryGradientMatchPyTorch) {
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, GetParam());
  const ModelConfig cfg = config_from(fx.config);
  Decoder model(cfg, ComputeDtype::fp32);
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

INSTANTIATE_TEST_SUITE_P(Fixtures, ModelReference, ::testing::Values("tiny_gqa_untied", "tiny_mha_tied"));

// Directional derivative of the loss along a random direction in each parameter, against the
// analytic gradient: (L(w + h r) - L(w - h r)) / 2h == g . r.
TEST(ModelFiniteDifference, EveryParameterAlongRandomDirection) {
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, "tiny_mha_tied");
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

}  // namespace
}  // namespace shardft

namespace shardft {
namespace {

// Memory-saving paths compute the same step: activation checkpointing bit for bit, the LM head and
// cross-entropy chunked over tokens to 1e-6 (only the order of the LM-head gradient sum changes), and
// memory-efficient attention to 1e-5 (scores recomputed, softmax normalised online).
TEST(ModelMemoryPaths, CheckpointingAndChunkedHeadMatchThePlainPath) {
  const auto fx = ReferenceFixture::load(SHARDFT_REFERENCE_DIR, "tiny_gqa_untied");
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

}  // namespace
}  // namespace shardft
