// Which attention kernel a run uses (infer/attention_choice.hpp), and, where the fused bf16 kernels are
// built (a GPU build with cuDNN), that a training step on them equals one on the log-sum-exp kernels within
// bf16 rounding, packed samples included.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/common/self_communicator.hpp"
#include "data/packing.hpp"
#include "kernels/attention_fused.hpp"
#include "kernels/attention_lse.hpp"
#include "tests/common/relative_difference.hpp"
#include "infer/attention_choice.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {
using testing_util::rel_diff;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(AttentionChoice, NamedKernelsAreTakenAsAskedAndAutoSaysWhy) {
  const AttentionChoice eager = choose_attention("eager", ComputeDtype::bf16);
  EXPECT_FALSE(eager.memory_efficient || eager.fused);
  EXPECT_TRUE(contains(eager.description, "eager")) << eager.description;
  const AttentionChoice lse = choose_attention("memory_efficient", ComputeDtype::bf16);
  EXPECT_TRUE(lse.memory_efficient && !lse.fused) << lse.description;
  // fp32 never runs the fused kernels, whatever the build, and says so when they are built.
  const AttentionChoice fp32 = choose_attention("auto", ComputeDtype::fp32);
  EXPECT_TRUE(fp32.memory_efficient && !fp32.fused) << fp32.description;
  // Given the head dimension, the description names the log-sum-exp kernel the dispatchers run for it.
  for (const int head_dim : {16, 64, 72}) {
    for (const ComputeDtype dtype : {ComputeDtype::fp32, ComputeDtype::bf16}) {
      const std::string kernel = attention_lse_kernel_name(dtype == ComputeDtype::bf16, head_dim);
      const AttentionChoice named = choose_attention("memory_efficient", dtype, true, head_dim);
      EXPECT_TRUE(contains(named.description, "log-sum-exp kernels: " + kernel + ")")) << named.description;
    }
  }
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    EXPECT_EQ(attention_lse_kernel_name(false, 64), attention_lse_avx512_fits({1, 1, 1, 1, 64})
                                                        ? "fused on AVX-512 FMAs" : "host sgemm tiles");
    EXPECT_EQ(attention_lse_kernel_name(false, 72), "host sgemm tiles");  // not a multiple of 16
  }
  for (const char* name : {"auto", "sdpa", "flash_attention_2"}) {
    const AttentionChoice c = choose_attention(name, ComputeDtype::bf16);
    EXPECT_TRUE(c.memory_efficient) << name << ": the log-sum-exp kernels stay the fallback";
    if (!fused_attention_built()) {
      EXPECT_FALSE(c.fused) << name;
      EXPECT_TRUE(contains(c.description, "fused kernels: " + fused_attention_backend())) << c.description;
    } else {
      EXPECT_EQ(c.fused, fused_attention_self_test().empty()) << c.description;
    }
    EXPECT_TRUE(c.deterministic_backward) << "deterministic unless asked otherwise";
    EXPECT_EQ(contains(c.description, "deterministic backward"), c.fused) << c.description;
  }
  // deterministic_attention: false takes the atomic backward only where the fused kernels run and it
  // passes its own self-test; the other kernels are deterministic anyway.
  const AttentionChoice atomic = choose_attention("auto", ComputeDtype::bf16, false);
  EXPECT_EQ(atomic.deterministic_backward, !atomic.fused || !fused_attention_self_test(false).empty())
      << atomic.description;
  EXPECT_EQ(contains(atomic.description, "atomic backward"), atomic.fused) << atomic.description;
  EXPECT_TRUE(choose_attention("memory_efficient", ComputeDtype::bf16, false).deterministic_backward);
}

TEST(AttentionChoice, UnbuiltFusedKernelsRefuseToRun) {
  if (fused_attention_built()) GTEST_SKIP() << "this build has the fused kernels (" << fused_attention_backend() << ")";
  EXPECT_THROW(fused_attention_stats_size({1, 8, 2, 1, 16}, {}), std::logic_error);
  EXPECT_FALSE(fused_attention_self_test().empty());
  EXPECT_FALSE(fused_attention_column_blocks_self_test().empty());
}

TrainConfig tiny_bf16(const char* attention) {
  TrainConfig c;
  c.model.vocab_size = ByteTokenizer::kVocabSize;
  c.model.hidden_size = 256;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 4;
  c.model.num_key_value_heads = 2;  // head_dim 64, GQA
  c.model.intermediate_size = 384;
  c.learning_rate = 1e-3;
  c.lr_scheduler_type = "constant";
  c.bf16 = true;
  c.attn_implementation = attention;
  c.seed = 3;
  return c;
}

TEST(FusedAttention, SelfTestPasses) {
  if (!fused_attention_built()) GTEST_SKIP() << "fused attention kernels: " << fused_attention_backend();
  EXPECT_EQ(fused_attention_self_test(), "");
  EXPECT_EQ(fused_attention_column_blocks_self_test(), "") << "q, k, v as column blocks of one array";
  EXPECT_EQ(fused_attention_self_test(false), "") << "the atomic backward (deterministic_attention: false)";
}

// Two steps on packed rows (several samples per row, a one-token-long tail) and on plain rows.
TEST(FusedAttention, TrainingStepsEqualTheLogSumExpKernelsWithinBf16) {
  if (!fused_attention_built()) GTEST_SKIP() << "fused attention kernels: " << fused_attention_backend();
  ByteTokenizer tok;
  std::vector<TokenizedSample> s;
  const char* words[] = {"ab", "qwerty", "xyz", "mnopqrstuvw", "k", "hello world", "shard", "attention"};
  for (const char* w : words) s.push_back(apply_chat_template(tok, {{"user", std::string("upper: ") + w}, {"assistant", w}}, 96));
  const std::vector<TokenBatch> batches = {collate_packed(s, {{0, 1, 2}, {3, 4}, {5, 6, 7}}, tok.kPad),
                                           collate(s, {0, 3, 5, 7})};
  for (const TokenBatch& b : batches) {
    Trainer fused(tiny_bf16("auto"), 5, self()), lse(tiny_bf16("memory_efficient"), 5, self());
    ASSERT_TRUE(fused.attention().fused) << fused.attention().description;
    ASSERT_FALSE(lse.attention().fused);
    // Step 1's gradient: the two kernels' bf16 outputs differ by rounding, and each activation gradient
    // is rounded to bf16 (2^-8) before the GEMMs, so they agree to a fraction of a bf16 ulp. (The weights
    // after AdamW are not compared: its first steps move an element by about lr whatever the size of its
    // gradient, so a gradient that is rounding noise moves as far as one that is not.)
    const StepStats a = fused.step({b}), r = lse.step({b});
    EXPECT_LT(std::abs(a.loss - r.loss) / r.loss, 1e-3);
    EXPECT_LT(std::abs(a.grad_norm - r.grad_norm) / r.grad_norm, 1e-2);
    EXPECT_LT(rel_diff(fused.engine().gather_grads(), lse.engine().gather_grads()), 2e-2);
    const StepStats a2 = fused.step({b}), r2 = lse.step({b});
    EXPECT_LT(std::abs(a2.loss - r2.loss) / r2.loss, 1e-2);
  }
}

}  // namespace
}  // namespace shardft
