// LoRA's term in the model (model/linear.hpp LoraTerm): the gradients of A and B (and, through the layers
// above, its share of dx) against central finite differences of the loss, fp32; frozen base weights get
// no gradient; B = 0 leaves the base model's loss exactly; checkpointing recomputes the same step.
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

ModelConfig small_model() { return lora_test::small_model(/*qkv_bias=*/true); }  // frozen biases too (Qwen2)
LoraSpec all_linear(int r) { return lora_test::all_linear(r, 0.0); }
ModelInputs batch() { return lora_test::random_batch(kBatch, kSeq); }
using lora_test::init_with_random_b;

double loss_at(Decoder& model, LocalParams& params, const ModelInputs& in) {
  return model.forward_loss(in, params).loss_sum;
}

TEST(LoraModel, GradientsOfAAndBMatchFiniteDifferences) {
  const ModelConfig cfg = small_model();
  Decoder model(cfg, ComputeDtype::fp32, all_linear(2));
  const ParamLayout& layout = model.layout();
  LocalParams params(layout);
  init_with_random_b(layout, cfg, params);
  const ModelInputs in = batch();
  model.forward_backward(in, params, params, 1.0);
  const std::vector<float> grads = to_host(params.grads());

  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (spec.is_lora()) continue;
    const std::int64_t off = layout.offset(static_cast<int>(p));
    // frozen: the model never wrote its gradient
    for (std::int64_t i = 0; i < spec.numel(); ++i) ASSERT_EQ(grads[off + i], 0.f) << spec.name;
  }
  int checked = 0;
  const double worst = lora_test::check_lora_finite_differences(
      layout, params, grads, [&] { return loss_at(model, params, in); }, 2, &checked);
  EXPECT_EQ(checked, 2 * 2 * 7 * 3);  // layers x (A, B) x modules x elements
  std::printf("LoRA finite differences: %d elements, worst relative error %.2e\n", checked, worst);
}

TEST(LoraModel, ZeroBLeavesTheBaseLossExactly) {
  const ModelConfig cfg = small_model();
  Decoder base(cfg, ComputeDtype::fp32), lora(cfg, ComputeDtype::fp32, all_linear(4));
  LocalParams bp(base.layout()), lp(lora.layout());
  init_params(base.layout(), cfg, 3, bp.weights());
  init_params(lora.layout(), cfg, 3, lp.weights());  // B = 0; copy the base in by name
  auto bh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bp.weights());
  auto lh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), lp.weights());
  for (std::size_t p = 0; p < base.layout().params().size(); ++p) {
    const ParamSpec& s = base.layout().params()[p];
    const int q = lora.layout().index(s.name);
    for (std::int64_t i = 0; i < s.numel(); ++i) lh(lora.layout().offset(q) + i) = bh(base.layout().offset(int(p)) + i);
  }
  Kokkos::deep_copy(lp.weights(), lh);
  const ModelInputs in = batch();
  EXPECT_EQ(base.forward_loss(in, bp).loss_sum, lora.forward_loss(in, lp).loss_sum);
}

TEST(LoraModel, CheckpointingRecomputesTheSameGradients) {
  const ModelConfig cfg = small_model();
  std::vector<float> runs[2];
  for (int ckpt = 0; ckpt < 2; ++ckpt) {
    Decoder model(cfg, ComputeDtype::bf16, all_linear(2));
    model.set_activation_checkpointing(ckpt == 1);
    LocalParams params(model.layout());
    init_with_random_b(model.layout(), cfg, params);
    model.forward_backward(batch(), params, params, 7.0);
    runs[ckpt] = to_host(params.grads());
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(LoraModel, LayoutFreezesTheBaseAndNamesAAndBAsPeftDoes) {
  LoraSpec qv = all_linear(8);
  qv.targets.fill(false);
  qv.targets[static_cast<int>(LoraModule::q_proj)] = qv.targets[static_cast<int>(LoraModule::v_proj)] = true;
  const ParamLayout layout(small_model(), qv);
  const ParamSpec& a = layout.params()[layout.index("model.layers.1.self_attn.v_proj.lora_A.weight")];
  const ParamSpec& b = layout.params()[layout.index("model.layers.1.self_attn.v_proj.lora_B.weight")];
  EXPECT_EQ(a.shape, (std::vector<std::int64_t>{8, 16}));
  EXPECT_EQ(b.shape, (std::vector<std::int64_t>{8, 8}));  // kv heads x head_dim = 2 x 4
  EXPECT_TRUE(a.takes_weight_decay());
  EXPECT_FALSE(a.frozen);
  EXPECT_TRUE(layout.params()[layout.index("model.layers.1.self_attn.v_proj.weight")].frozen);
  EXPECT_THROW(layout.index("model.layers.0.self_attn.k_proj.lora_A.weight"), std::out_of_range);
}

}  // namespace
}  // namespace shardft
