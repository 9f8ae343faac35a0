// LoRA dropout in the model (model/linear.hpp LoraTerm, kernels/dropout_mask.hpp): with the mask fixed
// (same step, same sample ids), the A and B gradients match central finite differences of the training
// loss; the base W x reads x undropped (B = 0 gives the base loss exactly under dropout); checkpointing's
// recompute draws the same masks (bit-identical gradients); evaluation never drops; another step draws
// another mask.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "finite_difference.hpp"
#include "model/decoder.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

constexpr int kBatch = 2, kSeq = 10;
constexpr double kDropout = 0.3;

ModelConfig small_model() {
  ModelConfig cfg;
  cfg.vocab_size = 64;
  cfg.hidden_size = 16;
  cfg.num_hidden_layers = 2;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 2;
  cfg.intermediate_size = 24;
  cfg.max_position_embeddings = 32;
  cfg.initializer_range = 0.3;
  return cfg;
}

LoraSpec all_linear() {
  LoraSpec s;
  s.enabled = true;
  s.r = 2;
  s.alpha = 3.0;
  s.dropout = kDropout;
  s.targets.fill(true);
  return s;
}

// Rows are samples 5 and 9 of some dataset.
ModelInputs batch() {
  std::vector<std::int32_t> ids, pos, seq_ids, targets, samples;
  const auto r = random_vector(kBatch * kSeq, 11, 0.f, 63.f);
  for (int i = 0; i < kBatch * kSeq; ++i) {
    ids.push_back(static_cast<std::int32_t>(r[i]));
    pos.push_back(i % kSeq);
    seq_ids.push_back(0);
    samples.push_back(i < kSeq ? 5 : 9);
  }
  for (int i = 0; i < kBatch * kSeq; ++i) targets.push_back(i % kSeq + 1 < kSeq ? ids[i + 1] : kIgnoreIndex);
  ModelInputs in = upload_inputs(kBatch, kSeq, ids, pos, seq_ids, targets);
  upload_sample_ids(in, samples);
  return in;
}

// Base from the seed, every B random (B = 0 would leave A's gradient zero) unless zero_b.
void init(const ParamLayout& layout, const ModelConfig& cfg, LocalParams& params, bool zero_b = false) {
  init_params(layout, cfg, 3, params.weights());
  if (zero_b) return;
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), params.weights());
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    if (layout.params()[p].kind != ParamKind::lora_b) continue;
    const auto v = random_vector(layout.params()[p].numel(), 100 + static_cast<std::uint32_t>(p), -0.3f, 0.3f);
    for (std::size_t i = 0; i < v.size(); ++i) host(layout.offset(static_cast<int>(p)) + i) = v[i];
  }
  Kokkos::deep_copy(params.weights(), host);
}

std::vector<float> step_grads(Decoder& model, LocalParams& params, const ModelInputs& in) {
  Kokkos::deep_copy(params.grads(), 0.f);
  model.forward_backward(in, params, params, 1.0);
  return to_host(params.grads());
}

TEST(LoraDropout, GradientsMatchFiniteDifferencesWithTheMaskFixed) {
  const ModelConfig cfg = small_model();
  Decoder model(cfg, ComputeDtype::fp32, all_linear());
  model.set_lora_dropout(kDropout, 17);
  model.set_dropout_step(2);
  const ParamLayout& layout = model.layout();
  LocalParams params(layout);
  init(layout, cfg, params);
  const ModelInputs in = batch();
  const std::vector<float> grads = step_grads(model, params, in);
  // The training loss with the same masks (forward_backward's; its gradients go to waste).
  auto loss = [&] { return model.forward_backward(in, params, params, 1.0).loss_sum; };
  int checked = 0;
  double worst = 0.0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!spec.is_lora()) continue;
    const std::int64_t off = layout.offset(static_cast<int>(p));
    for (std::int64_t i : {std::int64_t(0), spec.numel() / 3, spec.numel() - 1}) {
      auto w = Kokkos::subview(params.weights(), off + i);
      float orig = 0.f;
      Kokkos::deep_copy(orig, w);
      const float eps = 1e-2f;
      Kokkos::deep_copy(w, orig + eps);
      const double up = loss();
      Kokkos::deep_copy(w, orig - eps);
      const double down = loss();
      Kokkos::deep_copy(w, orig);
      const double fd = (up - down) / (2.0 * eps), g = grads[off + i];
      const double err = std::abs(fd - g) / std::max(1e-2, std::abs(fd));
      worst = std::max(worst, err);
      EXPECT_LT(err, 2e-2) << spec.name << "[" << i << "]: analytic " << g << ", finite difference " << fd;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 2 * 7 * 3);  // layers x (A, B) x modules x elements
  std::printf("LoRA dropout finite differences: %d elements, worst relative error %.2e\n", checked, worst);

  // Dropout is on in training (another loss and gradient than without it), off in evaluation.
  Decoder plain(cfg, ComputeDtype::fp32, all_linear());
  LocalParams plain_params(layout);
  init(layout, cfg, plain_params);
  const std::vector<float> plain_grads = step_grads(plain, plain_params, in);
  EXPECT_NE(plain_grads, grads);
  EXPECT_NE(plain.forward_backward(in, plain_params, plain_params, 1.0).loss_sum, loss());
  EXPECT_EQ(plain.forward_loss(in, plain_params).loss_sum, model.forward_loss(in, params).loss_sum);
  // Another step draws other masks.
  model.set_dropout_step(3);
  EXPECT_NE(step_grads(model, params, in), grads);
}

TEST(LoraDropout, BaseReadsTheUndroppedInput) {
  const ModelConfig cfg = small_model();
  Decoder model(cfg, ComputeDtype::fp32, all_linear());
  LocalParams params(model.layout());
  init(model.layout(), cfg, params, /*zero_b=*/true);
  const ModelInputs in = batch();
  const double eval = model.forward_loss(in, params).loss_sum;
  model.set_lora_dropout(kDropout, 17);
  EXPECT_EQ(model.forward_backward(in, params, params, 1.0).loss_sum, eval);
}

TEST(LoraDropout, CheckpointingRedrawsTheSameMasks) {
  const ModelConfig cfg = small_model();
  for (const ComputeDtype dtype : {ComputeDtype::fp32, ComputeDtype::bf16}) {
    std::vector<float> runs[2];
    for (int ckpt = 0; ckpt < 2; ++ckpt) {
      Decoder model(cfg, dtype, all_linear());
      model.set_activation_checkpointing(ckpt == 1);
      model.set_lora_dropout(kDropout, 17);
      model.set_dropout_step(4);
      LocalParams params(model.layout());
      init(model.layout(), cfg, params);
      runs[ckpt] = step_grads(model, params, batch());
    }
    EXPECT_EQ(runs[0], runs[1]) << (dtype == ComputeDtype::bf16 ? "bf16" : "fp32");
  }
}

}  // namespace
}  // namespace shardft
