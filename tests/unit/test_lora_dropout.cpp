// LoRA dropout in the model (model/linear.hpp LoraTerm, kernels/dropout_mask.hpp): with the mask fixed
// (same step, same sample ids), the A and B gradients match central finite differences of the training
// loss; the base W x reads x undropped (B = 0 gives the base loss exactly under dropout); checkpointing's
// recompute draws the same masks (bit-identical gradients); evaluation never drops; another step draws
// another mask.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "finite_difference.hpp"
#include "lora_test_model.hpp"
#include "model/decoder.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

constexpr int kBatch = 2, kSeq = 10;
constexpr double kDropout = 0.3;

ModelConfig small_model() { return lora_test::small_model(/*qkv_bias=*/false); }
LoraSpec all_linear() { return lora_test::all_linear(2, kDropout); }

ModelInputs batch() { return lora_test::sample_batch(kBatch, kSeq); }

// Base from the seed, every B random (B = 0 would leave A's gradient zero) unless zero_b.
void init(const ParamLayout& layout, const ModelConfig& cfg, LocalParams& params, bool zero_b = false) {
  if (zero_b) {
    init_params(layout, cfg, 3, params.weights());
  } else {
    lora_test::init_with_random_b(layout, cfg, params);
  }
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
  const double worst = lora_test::check_lora_finite_differences(layout, params, grads, loss, 3, &checked);
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
