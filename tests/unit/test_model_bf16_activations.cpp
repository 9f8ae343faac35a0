// bf16 compute keeps what backward reads again as bf16 (model/linear.hpp LinearInput, KeptActivation):
// each value is rounded once where it is made and forward goes on with it, so
//  - every layer's kept bytes are half of fp32's, less SwiGLU's output, which backward recomputes (rstd and the attention's log-sum-exp stay fp32), read
//    off the Kokkos allocations one more layer adds;
//  - checkpointing, which recomputes each layer into one layer's set of buffers (kept as every layer's
//    are), gives the same step bit for bit as keeping every layer's activations;
//  - the step stays near fp32's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/bf16_values.hpp"
#include "tests/common/device_build.hpp"
#include "tests/common/relative_difference.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/elementwise.hpp"
#include "model/decoder.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// Bytes of Kokkos allocations live now and not when it was made (kernels/device_traffic.hpp holds the
// process's one set of allocation hooks).
class LiveBytes {
 public:
  LiveBytes() : base_((install_device_traffic_hooks(), device_live_bytes())) {}
  std::int64_t now() const { return device_live_bytes() - base_; }

 private:
  std::int64_t base_;
};

constexpr int kBatch = 2, kSeq = 12;

ModelConfig small_model(int layers) {
  ModelConfig cfg;
  cfg.vocab_size = 272;
  cfg.hidden_size = 32;
  cfg.num_hidden_layers = layers;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 2;
  cfg.intermediate_size = 48;
  cfg.max_position_embeddings = 64;
  cfg.initializer_range = 0.2;
  return cfg;
}

ModelInputs two_packed_rows() {
  std::vector<std::int32_t> ids, pos, seq_ids, targets;
  const auto r = random_vector(kBatch * kSeq, 7, 0.f, 271.f);
  for (int i = 0; i < kBatch * kSeq; ++i) {
    ids.push_back(static_cast<std::int32_t>(r[i]));
    pos.push_back(i % kSeq);
    seq_ids.push_back(i % kSeq < 5 ? 0 : 1);
  }
  for (int i = 0; i < kBatch * kSeq; ++i) targets.push_back(i % kSeq + 1 < kSeq ? ids[i + 1] : kIgnoreIndex);
  return upload_inputs(kBatch, kSeq, ids, pos, seq_ids, targets);
}

struct Step {
  double loss;
  std::vector<float> grads;
};

// One forward_backward of a fresh model whose weights are bf16 values (as the engine hands them out).
Step step_of(int layers, ComputeDtype dtype, bool checkpointing, bool memory_efficient) {
  const ModelConfig cfg = small_model(layers);
  Decoder model(cfg, dtype);
  model.set_activation_checkpointing(checkpointing);
  model.set_memory_efficient_attention(memory_efficient);
  model.set_logits_chunk_tokens(7);
  LocalParams params(model.layout());
  init_params(model.layout(), cfg, 5, params.weights());
  round_to_bf16(params.weights(), params.weights());
  const double loss = model.forward_backward(two_packed_rows(), params, params, 22.0).loss_sum;
  return {loss, to_host(params.grads())};
}

// Bytes the first step of a fresh model leaves allocated (every buffer of the step is kept for the next).
std::int64_t step_bytes(int layers, ComputeDtype dtype, bool checkpointing) {
  const ModelConfig cfg = small_model(layers);
  const ModelInputs in = two_packed_rows();
  Decoder model(cfg, dtype);
  model.set_activation_checkpointing(checkpointing);
  model.set_memory_efficient_attention(true);
  LocalParams params(model.layout());
  init_params(model.layout(), cfg, 5, params.weights());
  Kokkos::fence();
  LiveBytes tracker;
  model.forward_backward(in, params, params, 22.0);
  Kokkos::fence();
  return tracker.now();
}

TEST(ModelBf16Activations, EachLayerKeepsHalfTheBytesOfFp32) {
  const ModelConfig cfg = small_model(1);
  const std::int64_t N = kBatch * kSeq, d = cfg.hidden_size, I = cfg.intermediate_size;
  const std::int64_t qd = d, kvd = static_cast<std::int64_t>(cfg.num_key_value_heads) * cfg.head_dim();
  // Per layer: GEMM inputs (attention h, o; MLP h, s), q, k, v, gu, x_mid and the layer's input, in the
  // compute precision's bytes; two rstd and the log-sum-exp in fp32. bf16 does not keep s: backward
  // recomputes it from gu (model/mlp_block.cpp).
  const std::int64_t elements = N * (d + qd + d + I) + N * (qd + 2 * kvd + 2 * I + d) + N * d;
  const std::int64_t fp32_only = 4 * (2 * N + std::int64_t{kBatch} * cfg.num_attention_heads * kSeq);
  for (const ComputeDtype dtype : {ComputeDtype::fp32, ComputeDtype::bf16}) {
    step_bytes(3, dtype, false);  // the allocations a backend makes once, and the process's scratch
    step_bytes(3, dtype, true);   // (kernel_scratch) at the sizes each path asks for
    const int bytes = dtype == ComputeDtype::bf16 ? 2 : 4;
    SCOPED_TRACE(bytes == 2 ? "bf16" : "fp32");
    const std::int64_t kept = dtype == ComputeDtype::bf16 ? elements - N * I : elements;
    EXPECT_EQ(step_bytes(3, dtype, false) - step_bytes(2, dtype, false), bytes * kept + fp32_only);
    // Checkpointing keeps only each layer's input.
    EXPECT_EQ(step_bytes(3, dtype, true) - step_bytes(2, dtype, true), bytes * N * d);
  }
}

// Recomputing each layer in backward and keeping every layer's activations from forward must hand
// backward the same numbers.
TEST(ModelBf16Activations, CheckpointingGivesTheSameStepBitForBit) {
  for (const bool memory_efficient : {false, true}) {
    SCOPED_TRACE(memory_efficient ? "memory-efficient attention" : "eager attention");
    const Step plain = step_of(2, ComputeDtype::bf16, false, memory_efficient);
    const Step ckpt = step_of(2, ComputeDtype::bf16, true, memory_efficient);
    EXPECT_EQ(ckpt.loss, plain.loss);
    EXPECT_EQ(ckpt.grads, plain.grads);
  }
}

using testing_util::rel_diff;

// The same weights (bf16 values) in fp32 compute: bf16 keeps 8 mantissa bits, a relative error of 2^-9
// per rounding, so loss and gradients stay within a few percent.
TEST(ModelBf16Activations, StepStaysNearFp32) {
  for (const bool checkpointing : {false, true}) {
    SCOPED_TRACE(checkpointing ? "checkpointing" : "every layer kept");
    const Step fp32 = step_of(2, ComputeDtype::fp32, checkpointing, true);
    const Step bf16 = step_of(2, ComputeDtype::bf16, checkpointing, true);
    const double grads = rel_diff(bf16.grads, fp32.grads);
    std::printf("  %-16s loss %.3e, gradients %.3e relative to fp32\n", checkpointing ? "checkpointing" : "every layer",
                std::abs(bf16.loss - fp32.loss) / fp32.loss, grads);
    EXPECT_NEAR(bf16.loss, fp32.loss, 5e-3 * fp32.loss);
    EXPECT_LT(grads, 3e-2);
  }
}

// The gradient at a norm's output, as its dgrad writes it (model/linear.hpp norm_output_grad): in a bf16
// step a plain layer writes it rounded to bf16 once, as autocast's linear backward hands it to the fp32
// norm; a layer with a bias, and an fp32 step, write fp32.
TEST(ModelNormOutputGrad, PlainBf16LayersWriteItRounded) {
  const int rows = 9, out = 5, in = 7;
  const auto wd = to_device(testing_util::rounded_to_bf16(random_vector(out * in, 461)), out, in, "w");
  const auto dy = testing_util::rounded_to_bf16(random_vector(rows * out, 462));
  const auto dyd = to_device(dy, rows, out, "dy");
  const auto bias = to_device(random_vector(out, 463), "bias");
  const LinearGrad g{dyd, GemmOperand(Unmanaged2<const float>(dyd))};
  NormOutputGrad dh;
  const Linear fp32_layer(wd, {}, ComputeDtype::fp32), with_bias(wd, bias, ComputeDtype::bf16);
  EXPECT_FALSE(dgrad_writes_bf16(fp32_layer));
  EXPECT_FALSE(dgrad_writes_bf16(with_bias));
  const GemmOperand fp32 = norm_output_grad(fp32_layer, g, dh);
  ASSERT_FALSE(fp32.is_bf16);
  const std::vector<float> exact = to_host(fp32.f32);  // dy W in fp32
  const GemmOperand biased = norm_output_grad(with_bias, g, dh);
  ASSERT_FALSE(biased.is_bf16);
  EXPECT_EQ(to_host(biased.f32), exact);

  const Linear plain(wd, {}, ComputeDtype::bf16);
  ASSERT_TRUE(dgrad_writes_bf16(plain));
  const GemmOperand rounded = norm_output_grad(plain, g, dh);
  ASSERT_TRUE(rounded.is_bf16);
  ASSERT_EQ(rounded.extent(0), static_cast<std::size_t>(rows));
  ASSERT_EQ(rounded.extent(1), static_cast<std::size_t>(in));
  const std::vector<float> got = testing_util::widened(rounded.b16);
  int inexact = 0;  // elements whose fp32 value is not a bf16 value: the rounding is seen there
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float want = round_to_bf16(exact[i]);
    inexact += want != exact[i];
    // Exact on the host (the same fp32 sums); a GPU's tensor cores sum in another order: one bf16 ulp.
    EXPECT_LE(std::abs(got[i] - want), testing_util::host_or_device_tol(0.0, std::ldexp(std::abs(want), -7))) << i;
  }
  EXPECT_GT(inexact, rows * in / 2);
}

// q, k and v as one layer (AttentionWeights::qkv) only where they have no bias, share their storage and
// lie back to back, their LoRA terms then the stacked layer's on their columns; their gradients likewise,
// or all frozen, and their LoRA gradients in the parts' order.
TEST(ModelStackedQkv, StackingNeedsLayersWithoutBiasBackToBack) {
  View1<float> w("w", 8 * 3), g("g", 8 * 3);
  const auto rows_at = [&](std::int64_t row, std::int64_t n) { return Unmanaged2<const float>(w.data() + row * 3, n, 3); };
  const Linear q(rows_at(0, 4), {}, ComputeDtype::bf16), k(rows_at(4, 2), {}, ComputeDtype::bf16),
      v(rows_at(6, 2), {}, ComputeDtype::bf16);
  Linear stacked;
  ASSERT_TRUE(Linear::stack({&q, &k, &v}, stacked));
  EXPECT_EQ(stacked.out_features(), 8);
  EXPECT_EQ(stacked.in_features(), 3);
  EXPECT_FALSE(Linear::stack({&q, &v, &k}, stacked)) << "v does not follow q";
  const Linear k_with_bias(rows_at(4, 2), Unmanaged1<const float>(w.data(), 2), ComputeDtype::bf16);
  EXPECT_FALSE(Linear::stack({&q, &k_with_bias, &v}, stacked)) << "a bias";
  const Linear v_fp32(rows_at(6, 2), {}, ComputeDtype::fp32);
  EXPECT_FALSE(Linear::stack({&q, &k, &v_fp32}, stacked)) << "another compute dtype";
  EXPECT_EQ(stacked.out_features(), 8) << "a refused stack leaves the layer alone";

  const auto grad_at = [&](std::int64_t row, std::int64_t n) { return Unmanaged2<float>(g.data() + row * 3, n, 3); };
  const LinearGrads gq{grad_at(0, 4), {}, {}}, gk{grad_at(4, 2), {}, {}}, gv{grad_at(6, 2), {}, {}}, frozen{};
  LinearGrads stacked_grads;
  ASSERT_TRUE(stack_linear_grads({&gq, &gk, &gv}, stacked_grads));
  EXPECT_EQ(stacked_grads.weight.data(), g.data());
  EXPECT_EQ(stacked_grads.weight.extent(0), 8u);
  ASSERT_TRUE(stack_linear_grads({&frozen, &frozen, &frozen}, stacked_grads));
  EXPECT_EQ(stacked_grads.weight.extent(0), 0u) << "all frozen: no weight gradient";
  EXPECT_FALSE(stack_linear_grads({&gq, &frozen, &gv}, stacked_grads)) << "some frozen";
  EXPECT_FALSE(stack_linear_grads({&gq, &gv, &gk}, stacked_grads)) << "out of order";

  // LoRA on q and v (frozen bases): two terms of the stacked layer, on q's columns and on v's
  View1<float> lora("lora", 2 * 4 * 3 + 4 * 2 + 2 * 2);
  const Unmanaged2<const float> a_q(lora.data(), 2, 3), a_v(lora.data() + 6, 2, 3), b_q(lora.data() + 12, 4, 2),
      b_v(lora.data() + 20, 2, 2);
  Linear q_lora = q, v_lora = v;
  q_lora.add_lora(LoraTerm{a_q, b_q, 1.f, 0, {}});
  v_lora.add_lora(LoraTerm{a_v, b_v, 2.f, 0, {}});
  ASSERT_TRUE(Linear::stack({&q_lora, &k, &v_lora}, stacked));
  ASSERT_EQ(stacked.num_lora(), 2);
  EXPECT_EQ(stacked.lora_term(0).col0, 0);
  EXPECT_EQ(stacked.lora_term(0).b.f32.data(), b_q.data());
  EXPECT_EQ(stacked.lora_term(1).col0, 6) << "v's columns follow q's 4 and k's 2";
  EXPECT_EQ(stacked.lora_term(1).scale, 2.f);
  View2<float> da_q("da_q", 2, 3), db_q("db_q", 4, 2), da_v("da_v", 2, 3), db_v("db_v", 2, 2);
  LinearGrads lq{{}, {}, {LoraGrads{da_q, db_q}}}, lv{{}, {}, {LoraGrads{da_v, db_v}}};
  lv.lora[0].overwrite_a = true;
  ASSERT_TRUE(stack_linear_grads({&lq, &frozen, &lv}, stacked_grads));
  EXPECT_EQ(stacked_grads.weight.extent(0), 0u);
  EXPECT_EQ(stacked_grads.lora[0].a.data(), da_q.data());
  EXPECT_EQ(stacked_grads.lora[1].b.data(), db_v.data());
  EXPECT_TRUE(stacked_grads.lora[1].overwrite_a);
  EXPECT_EQ(stacked_grads.lora[2].a.extent(0), 0u);
  LinearGrads gq_lora = gq;
  gq_lora.lora[0] = LoraGrads{da_q, db_q};
  EXPECT_FALSE(stack_linear_grads({&gq_lora, &gv, &gk}, stacked_grads)) << "weights out of order";
  EXPECT_EQ(stacked_grads.weight.extent(0), 0u) << "a refused stack holds the LoRA gradients alone";
  EXPECT_EQ(stacked_grads.lora[0].a.data(), da_q.data());
}

// Gradients from LocalParams, but q, k and v's from buffers of their own (not back to back), as a sharded
// gradient store might hand them out.
class QkvGradsApart : public GradSink {
 public:
  QkvGradsApart(LocalParams& params, const ParamLayout& layout) : params_(params), layout_(layout) {}
  Unmanaged1<float> grad(int param) override {
    for (int l = 0; l < layout_.num_layers(); ++l) {
      const LayerParams& P = layout_.layer(l);
      if (param != P.q_proj && param != P.k_proj && param != P.v_proj) continue;
      View1<float>& g = apart_[param];
      if (g.extent(0) == 0) g = View1<float>("apart", static_cast<std::size_t>(layout_.params()[param].numel()));
      return g;
    }
    return params_.grad(param);
  }
  void block_done(int) override {}
  // Every gradient in layout order, q, k and v's copied from their own buffers.
  std::vector<float> all() const {
    std::vector<float> out = to_host(params_.grads());
    for (const auto& [param, g] : apart_) {
      const std::vector<float> h = to_host(g);
      std::copy(h.begin(), h.end(), out.begin() + layout_.offset(param));
    }
    return out;
  }

 private:
  LocalParams& params_;
  const ParamLayout& layout_;
  std::map<int, View1<float>> apart_;
};

TEST(ModelStackedQkv, GradientsApartGetTheSameStep) {
  const ModelConfig cfg = small_model(2);
  Decoder model(cfg, ComputeDtype::bf16);
  model.set_memory_efficient_attention(true);
  LocalParams params(model.layout());
  init_params(model.layout(), cfg, 5, params.weights());
  round_to_bf16(params.weights(), params.weights());
  const double together = model.forward_backward(two_packed_rows(), params, params, 22.0).loss_sum;
  const std::vector<float> expected = to_host(params.grads());
  Kokkos::deep_copy(params.grads(), 0.f);
  QkvGradsApart apart(params, model.layout());
  const double separately = model.forward_backward(two_packed_rows(), params, apart, 22.0).loss_sum;
  EXPECT_EQ(separately, together);
  EXPECT_EQ(apart.all(), expected);
}

}  // namespace
}  // namespace shardft
