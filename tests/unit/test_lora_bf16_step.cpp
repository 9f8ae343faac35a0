// A bf16 LoRA step on the packed path (model/linear.hpp: q/k/v stacked with their LoRA terms on their
// columns, every LoRA layer writing bf16 as the plain ones do, the memory-efficient attention reading the
// packed [q | k | v]): its LoRA gradients stay within bf16's reach of the fp32 step's and of the bf16
// staged path's (separate projections, fp32 buffers rounded where the packed path rounds), with dropout on
// every term.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "finite_difference.hpp"
#include "lora_test_model.hpp"
#include "model/decoder.hpp"
#include "tests/common/relative_difference.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// The flat gradient's LoRA entries after one step of `dtype` (packed: the memory-efficient kernels, which
// read q, k and v as column blocks of the stacked projection's bf16 output).
std::vector<float> lora_grads(ComputeDtype dtype, bool packed) {
  const ModelConfig cfg = lora_test::small_model(/*qkv_bias=*/false);
  Decoder model(cfg, dtype, lora_test::all_linear(2, 0.3));
  model.set_memory_efficient_attention(packed);
  model.set_lora_dropout(0.3, 17);
  model.set_dropout_step(2);
  LocalParams params(model.layout());
  lora_test::init_with_random_b(model.layout(), cfg, params);
  Kokkos::deep_copy(params.grads(), 0.f);
  model.forward_backward(lora_test::sample_batch(2, 10), params, params, 1.0);
  const std::vector<float> all = to_host(params.grads());
  std::vector<float> out;
  for (std::size_t p = 0; p < model.layout().params().size(); ++p) {
    if (!model.layout().params()[p].is_lora()) continue;
    const std::int64_t at = model.layout().offset(static_cast<int>(p));
    out.insert(out.end(), all.begin() + at, all.begin() + at + model.layout().params()[p].numel());
  }
  return out;
}

TEST(LoraBf16Step, PackedPathGradientsNearFp32AndTheStagedPath) {
  const std::vector<float> fp32 = lora_grads(ComputeDtype::fp32, true);
  const std::vector<float> packed = lora_grads(ComputeDtype::bf16, true);
  const std::vector<float> staged = lora_grads(ComputeDtype::bf16, false);
  ASSERT_EQ(packed.size(), fp32.size());
  const double to_fp32 = testing_util::rel_diff(packed, fp32), to_staged = testing_util::rel_diff(packed, staged);
  const double staged_to_fp32 = testing_util::rel_diff(staged, lora_grads(ComputeDtype::fp32, false));
  std::printf("bf16 LoRA gradients: packed path %.3e from fp32, %.3e from the staged path (itself %.3e from fp32)\n",
              to_fp32, to_staged, staged_to_fp32);
  EXPECT_LT(to_fp32, 2 * staged_to_fp32) << "no further from fp32 than bf16's other path, give or take";
  EXPECT_LT(to_fp32, 5e-2);
  EXPECT_LT(to_staged, 3e-2);
  EXPECT_GT(to_fp32, 0.0) << "a bf16 step rounds";
}

}  // namespace
}  // namespace shardft
