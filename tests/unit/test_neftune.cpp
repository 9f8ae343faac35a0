// NEFTune (HF's neftune_noise_alpha): uniform noise in [-m, m), m = alpha / sqrt(seq * hidden), on the
// input embeddings in training only. The noise kernel's range and moments; in the model, with the noise
// fixed (same seed and step) the gradients match central finite differences of the noisy training loss,
// evaluation sees no noise, another step draws other noise, and checkpointing's recompute keeps it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/uniform_noise.hpp"
#include "lora_test_model.hpp"
#include "model/decoder.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

TEST(UniformNoise, UniformInTheRangeAndKeyedByRowAndStream) {
  const int rows = 64, cols = 256;
  const float m = 0.5f;
  std::vector<std::uint64_t> keys(rows);
  for (int r = 0; r < rows; ++r) keys[r] = 1000 + static_cast<std::uint64_t>(r);
  const auto key = to_device(keys);
  auto draw = [&](std::uint64_t stream) {
    View2<float> x("x", rows, cols);
    add_uniform_noise(x, m, stream, key);
    return to_host(x);
  };
  const std::vector<float> a = draw(7);
  double sum = 0, sq = 0;
  for (float v : a) {
    ASSERT_GE(v, -m);
    ASSERT_LT(v, m);
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(a.size()), mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_LT(std::fabs(mean), 0.01);
  EXPECT_NEAR(sd, m / std::sqrt(3.0), 0.01);  // a uniform's standard deviation
  EXPECT_EQ(draw(7), a) << "the same keys draw the same noise";
  EXPECT_NE(draw(8), a) << "another stream, other noise";
  View2<float> shifted("shifted", rows, cols);
  keys[0] += 1;
  add_uniform_noise(shifted, m, 7, to_device(keys));
  const std::vector<float> b = to_host(shifted);
  EXPECT_NE(std::vector<float>(b.begin(), b.begin() + cols), std::vector<float>(a.begin(), a.begin() + cols));
  EXPECT_EQ(std::vector<float>(b.begin() + cols, b.end()), std::vector<float>(a.begin() + cols, a.end()));
}

constexpr int kBatch = 2, kSeq = 10;

ModelInputs batch() { return lora_test::sample_batch(kBatch, kSeq); }

std::vector<float> step_grads(Decoder& model, LocalParams& params, const ModelInputs& in) {
  Kokkos::deep_copy(params.grads(), 0.f);
  model.forward_backward(in, params, params, 1.0);
  return to_host(params.grads());
}

TEST(Neftune, GradientsMatchFiniteDifferencesWithTheNoiseFixed) {
  const ModelConfig cfg = lora_test::small_model(false);
  Decoder model(cfg, ComputeDtype::fp32);
  model.set_neftune(5.0, 17);
  model.set_dropout_step(2);
  LocalParams params(model.layout());
  init_params(model.layout(), cfg, 3, params.weights());
  const ModelInputs in = batch();
  const std::vector<float> grads = step_grads(model, params, in);
  auto loss = [&] { return model.forward_backward(in, params, params, 1.0).loss_sum; };
  // Central differences at three elements of every parameter (the noise does not move: same step, same
  // tokens, so the loss is a smooth function of the weights).
  int checked = 0;
  const double worst = lora_test::check_finite_differences(model.layout(), params, grads, loss, 3, &checked,
                                                           [](const ParamSpec&) { return true; });
  std::printf("NEFTune finite differences: %d elements, worst relative error %.2e\n", checked, worst);

  // Noise in training (another loss than without it), none in evaluation; another step, other noise.
  Decoder plain(cfg, ComputeDtype::fp32);
  EXPECT_NE(plain.forward_backward(in, params, params, 1.0).loss_sum, loss());
  EXPECT_EQ(plain.forward_loss(in, params).loss_sum, model.forward_loss(in, params).loss_sum);
  model.set_dropout_step(3);
  EXPECT_NE(step_grads(model, params, in), grads);
}

TEST(Neftune, CheckpointingKeepsTheNoise) {
  const ModelConfig cfg = lora_test::small_model(false);
  for (const ComputeDtype dtype : {ComputeDtype::fp32, ComputeDtype::bf16}) {
    std::vector<float> runs[2];
    for (int ckpt = 0; ckpt < 2; ++ckpt) {
      Decoder model(cfg, dtype);
      model.set_activation_checkpointing(ckpt == 1);
      model.set_neftune(5.0, 17);
      model.set_dropout_step(4);
      LocalParams params(model.layout());
      init_params(model.layout(), cfg, 3, params.weights());
      runs[ckpt] = step_grads(model, params, batch());
    }
    EXPECT_EQ(runs[0], runs[1]) << (dtype == ComputeDtype::bf16 ? "bf16" : "fp32");
  }
}

}  // namespace
}  // namespace shardft
