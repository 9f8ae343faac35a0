// bf16 compute with the weights stored as bf16 (ParamSource::weight_bf16, as the sharding engine keeps
// them) against the same values held as fp32 (LocalParams): the GEMMs multiply the same bf16 values
// and accumulate in fp32 either way, so loss, gradients and logits agree to fp32 rounding. Tied and
// untied, biases, eager and memory-efficient attention, with and without activation checkpointing.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/device_build.hpp"
#include "tests/common/relative_difference.hpp"
#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/elementwise.hpp"
#include "model/decoder.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// The weights of a LocalParams as bf16 storage; weight() widens them (what a bf16 source hands out for
// norm weights and biases).
class Bf16Params : public ParamSource {
 public:
  explicit Bf16Params(const LocalParams& src)
      : layout_(src.layout()), half_("half", src.weights().extent(0)), widened_("widened", src.weights().extent(0)) {
    to_bf16(src.weights(), half_);
    to_f32(half_, widened_);
  }
  void acquire(int, Pass) override {}
  void release(int, Pass) override {}
  Unmanaged1<const float> weight(int p) override {
    return Unmanaged1<const float>(widened_.data() + layout_.offset(p), layout_.params()[p].numel());
  }
  Unmanaged1<const bf16> weight_bf16(int p) override {
    return Unmanaged1<const bf16>(half_.data() + layout_.offset(p), layout_.params()[p].numel());
  }

 private:
  const ParamLayout& layout_;
  View1<bf16> half_;
  View1<float> widened_;
};

using testing_util::rel_diff;

struct Variant {
  bool tied, qkv_bias, memory_efficient, checkpointing;
};

TEST(ModelBf16Storage, SameResultsAsBf16ValuesHeldInFp32) {
  for (const Variant v : {Variant{true, false, false, false}, Variant{false, true, true, false},
                          Variant{false, false, true, true}, Variant{true, true, false, true}}) {
    SCOPED_TRACE(std::string(v.tied ? "tied" : "untied") + (v.qkv_bias ? " qkv_bias" : "") +
                 (v.memory_efficient ? " memory_efficient" : "") + (v.checkpointing ? " checkpointing" : ""));
    ModelConfig cfg;
    cfg.vocab_size = 272;
    cfg.hidden_size = 32;
    cfg.num_hidden_layers = 2;
    cfg.num_attention_heads = 4;
    cfg.num_key_value_heads = 2;
    cfg.intermediate_size = 48;
    cfg.max_position_embeddings = 64;
    cfg.tie_word_embeddings = v.tied;
    cfg.qkv_bias = v.qkv_bias;
    cfg.initializer_range = 0.2;
    Decoder model(cfg, ComputeDtype::bf16);
    model.set_memory_efficient_attention(v.memory_efficient);
    model.set_activation_checkpointing(v.checkpointing);
    model.set_logits_chunk_tokens(7);
    LocalParams fp32_held(model.layout());
    init_params(model.layout(), cfg, 5, fp32_held.weights());
    round_to_bf16(fp32_held.weights(), fp32_held.weights());
    Bf16Params bf16_held(fp32_held);
    LocalParams grads_a(model.layout()), grads_b(model.layout());

    const int B = 2, T = 12;
    std::vector<std::int32_t> ids, pos, seq_ids, targets;
    const auto r = random_vector(B * T, 7, 0.f, 271.f);
    for (int i = 0; i < B * T; ++i) {
      ids.push_back(static_cast<std::int32_t>(r[i]));
      pos.push_back(i % T);
      seq_ids.push_back(i % T < 5 ? 0 : 1);  // two packed samples per row
    }
    for (int i = 0; i < B * T; ++i) targets.push_back(i % T + 1 < T ? ids[i + 1] : kIgnoreIndex);
    const ModelInputs in = upload_inputs(B, T, ids, pos, seq_ids, targets);

    const LossSums a = model.forward_backward(in, fp32_held, grads_a, 22.0);
    const LossSums b = model.forward_backward(in, bf16_held, grads_b, 22.0);
    EXPECT_EQ(a.num_targets, b.num_targets);
    EXPECT_NEAR(b.loss_sum, a.loss_sum, 1e-6 * std::abs(a.loss_sum));
    // A GPU multiplies bf16 storage with bf16 tensor-core GEMMs and fp32 storage with fp32 ones: the
    // same products, summed in another order. Each activation gradient is then rounded to bf16 before
    // the next layer's GEMMs, and a value on a rounding boundary lands one bf16 ulp (2^-8) apart: on a GPU
    // the gradients agree to a fraction of a bf16 ulp (measured on an H200: 1.0e-3), as on a CPU whose AMX
    // tiles run the bf16 x bf16 products (1.2e-3 here), and to fp32 rounding on other CPUs (one BLAS for both).
    const bool two_engines = kComputeOnDevice || amx::available();
    EXPECT_LT(rel_diff(to_host(grads_b.grads()), to_host(grads_a.grads())), two_engines ? 4e-3 : 1e-6);

    View2<float> la("la", 3, cfg.vocab_size), lb("lb", 3, cfg.vocab_size);
    const auto rows = to_device(std::vector<std::int32_t>{0, 11, 17});
    model.forward_logits(in, fp32_held, rows, la);
    model.forward_logits(in, bf16_held, rows, lb);
    EXPECT_LT(rel_diff(to_host(lb), to_host(la)), 1e-6);
  }
}

}  // namespace
}  // namespace shardft
