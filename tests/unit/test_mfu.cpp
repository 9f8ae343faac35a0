// MFU's FLOP count per token against the parameter layout, and the peak it divides by.
#include <gtest/gtest.h>

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/compute_device.hpp"
#include "model/param_layout.hpp"
#include "train/mfu.hpp"

namespace shardft {
namespace {

// Matmul weights counted from the layout: every matrix but the embedding lookup, plus the LM head
// (which, tied, is the embedding matrix used a second time, as a GEMM).
double matmul_params(const ModelConfig& m) {
  const ParamLayout layout(m);
  double n = 0;
  for (const ParamSpec& p : layout.params()) {
    if (p.shape.size() == 2 && p.name != "model.embed_tokens.weight") n += static_cast<double>(p.numel());
  }
  if (m.tie_word_embeddings) n += static_cast<double>(layout.params()[layout.embed_tokens()].numel());
  return n;
}

TEST(Mfu, FlopsPerTokenIsSixTimesTheMatmulWeightsPlusAttention) {
  for (bool tied : {true, false}) {
    ModelConfig m;
    m.vocab_size = 1000;
    m.hidden_size = 64;
    m.num_hidden_layers = 3;
    m.num_attention_heads = 8;
    m.num_key_value_heads = 2;
    m.intermediate_size = 160;
    m.tie_word_embeddings = tied;
    m.qkv_bias = true;  // biases do no matmul
    const double T = 37;
    EXPECT_DOUBLE_EQ(training_flops_per_token(m, T), 6 * matmul_params(m) + 12.0 * 3 * 64 * T) << tied;
    // An explicit head_dim (Qwen3, Mistral Nemo): the projections and attention are heads * head_dim wide.
    m.explicit_head_dim = 16;  // 8 heads * 16 = 128 != hidden 64
    EXPECT_DOUBLE_EQ(training_flops_per_token(m, T), 6 * matmul_params(m) + 12.0 * 3 * 128 * T) << tied;
  }
}

TEST(Mfu, PeakIsTheGivenOneOrAMeasuredGemmRate) {
  EXPECT_DOUBLE_EQ(peak_flops_per_rank(2.5), 2.5e12);
  const double measured = peak_flops_per_rank(0);
  EXPECT_GT(measured, 1e8);    // any CPU of this century does 0.1 GFLOP/s
  EXPECT_LT(measured, 1e14);   // and no core does 100 TFLOP/s of fp32
}

// A bf16 step whose GEMMs run on AMX tiles divides by the tiles' measured rate; fp16 (fp32 GEMMs on a CPU)
// and fp32 by sgemm's.
TEST(Mfu, Bf16OnAmxTilesDividesByTheirMeasuredRate) {
  if (compute_device().gpu) GTEST_SKIP() << "the model runs on a GPU here; its peak is the GPU's";
  const PeakFlops fp16 = resolve_peak_flops(0, true, false);
  EXPECT_NE(fp16.basis.find("measured fp32 GEMM rate"), std::string::npos) << fp16.basis;
  const PeakFlops bf16 = resolve_peak_flops(0, true, true);
  if (!amx::available()) {
    EXPECT_NE(bf16.basis.find("measured fp32 GEMM rate"), std::string::npos) << bf16.basis;
    return;
  }
  EXPECT_NE(bf16.basis.find("measured bf16 GEMM rate on AMX tiles"), std::string::npos) << bf16.basis;
  EXPECT_GT(bf16.flops, 1e8);
}

}  // namespace
}  // namespace shardft
