// One optimizer step: accumulation equivalence, loss normalisation over the whole step, clipping,
// the LR schedules, and bf16 compute staying near fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/common/device_build.hpp"
#include "tests/common/relative_difference.hpp"
#include "tests/common/self_communicator.hpp"
#include "config/recipe_sections.hpp"
#include "train/lr_schedule.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {
using testing_util::rel_diff;

TrainConfig tiny_config() {
  TrainConfig c;
  c.model.vocab_size = ByteTokenizer::kVocabSize;
  c.model.hidden_size = 32;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 4;
  c.model.num_key_value_heads = 2;
  c.model.intermediate_size = 48;
  c.learning_rate = 1e-2;
  c.lr_scheduler_type = "constant";
  c.weight_decay = 0.1;
  c.max_grad_norm = 0.0;
  c.seed = 11;
  return c;
}

// Four samples whose answers differ in length, so micro-batches hold different target counts.
std::vector<TokenizedSample> four_samples() {
  ByteTokenizer tok;
  const char* q[] = {"upper: ab", "upper: qwerty", "upper: xyz", "upper: mnopqrst"};
  const char* a[] = {"AB", "QWERTY", "XYZ", "MNOPQRST"};
  std::vector<TokenizedSample> s;
  for (int i = 0; i < 4; ++i) s.push_back(apply_chat_template(tok, {{"user", q[i]}, {"assistant", a[i]}}, 64));
  return s;
}

// The compute-precision weights the model reads, in layout order.
std::vector<float> compute_weights(Trainer& tr) {
  std::vector<float> out;
  const auto& layout = tr.model().layout();
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    auto w = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tr.engine().weight(static_cast<int>(p)));
    out.insert(out.end(), w.data(), w.data() + w.extent(0));
  }
  return out;
}

TEST(TrainStep, TheFirstNonFiniteParameterIsNamed) {
  Trainer tr(tiny_config(), 10, self());
  EXPECT_EQ(tr.first_nonfinite_parameter(), "");
  const auto& layout = tr.model().layout();
  auto master = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tr.engine().master());
  // Then a second, earlier in layout order: the earlier one is named, whatever order they went bad in.
  for (const char* name : {"model.layers.1.self_attn.o_proj.weight", "model.layers.0.mlp.down_proj.weight"}) {
    int p = 0;
    while (layout.params()[p].name != name) ++p;
    master(layout.offset(p) + 5) = std::numeric_limits<float>::quiet_NaN();
    Kokkos::deep_copy(tr.engine().master(), master);
    EXPECT_EQ(tr.first_nonfinite_parameter(), name);
  }
}

TEST(TrainStep, MicroBatch4EqualsFourMicroBatchesOf1) {
  const auto samples = four_samples();
  const TrainConfig cfg = tiny_config();
  Trainer whole(cfg, 10, self()), split(cfg, 10, self());
  for (int step = 0; step < 3; ++step) {
    const StepStats a = whole.step({collate(samples, {0, 1, 2, 3})});
    const StepStats b = split.step({collate(samples, {0}), collate(samples, {1}), collate(samples, {2}), collate(samples, {3})});
    EXPECT_EQ(a.targets, b.targets);
    EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::abs(a.loss));
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * a.grad_norm);
  }
  // On a GPU cuBLAS picks its GEMM algorithm by shape, so a batch of 4 and 4 batches of 1 sum in
  // different orders.
  EXPECT_LT(rel_diff(split.engine().gather_master(), whole.engine().gather_master()),
            testing_util::host_or_device_tol(1e-6, 1e-5));
}

TEST(TrainStep, LossIsMeanOverTheStepsTargetsNotMeanOfMicroBatchMeans) {
  const auto samples = four_samples();
  const TrainConfig cfg = tiny_config();
  Trainer tr(cfg, 10, self());
  const TokenBatch small = collate(samples, {0}), large = collate(samples, {3});
  ASSERT_NE(small.num_targets(), large.num_targets());
  const LossSums ls = tr.model().forward_loss(to_model_inputs(small), tr.engine());
  const LossSums ll = tr.model().forward_loss(to_model_inputs(large), tr.engine());
  const StepStats st = tr.step({small, large});
  const double token_mean = (ls.loss_sum + ll.loss_sum) / double(ls.num_targets + ll.num_targets);
  const double mean_of_means = 0.5 * (ls.loss_sum / ls.num_targets + ll.loss_sum / ll.num_targets);
  EXPECT_NEAR(st.loss, token_mean, 1e-6 * token_mean);
  EXPECT_GT(std::abs(st.loss - mean_of_means), 1e-4);
}

TEST(TrainStep, ClippingScalesTheGradientToMaxNorm) {
  const auto samples = four_samples();
  TrainConfig cfg = tiny_config();
  cfg.max_grad_norm = 1e-3;  // far below the natural norm, so clipping acts
  Trainer tr(cfg, 10, self());
  const StepStats st = tr.step({collate(samples, {0, 1, 2, 3})});
  EXPECT_GT(st.grad_norm, 1e-3);
  const double clipped = std::sqrt([&] {
    double s = 0;
    for (float g : tr.engine().gather_grads()) s += double(g) * g;
    return s;
  }());
  EXPECT_NEAR(clipped, 1e-3, 1e-6);
}

TEST(TrainStep, SameSeedSameLossesBitwise) {
  const auto samples = four_samples();
  const TrainConfig cfg = tiny_config();
  Trainer a(cfg, 10, self()), b(cfg, 10, self());
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(a.step({collate(samples, {0, 2})}).loss, b.step({collate(samples, {0, 2})}).loss);
  }
  TrainConfig other = cfg;
  other.seed = 12;
  Trainer c(other, 10, self());
  EXPECT_NE(c.step({collate(samples, {0, 2})}).loss, Trainer(cfg, 10, self()).step({collate(samples, {0, 2})}).loss);
}

TEST(TrainStep, Bf16ComputeStaysNearFp32) {
  const auto samples = four_samples();
  TrainConfig cfg = tiny_config();
  Trainer fp32(cfg, 10, self());
  cfg.bf16 = true;
  Trainer bf16(cfg, 10, self());
  for (int step = 0; step < 5; ++step) {
    const double a = fp32.step({collate(samples, {0, 1, 2, 3})}).loss;
    const double b = bf16.step({collate(samples, {0, 1, 2, 3})}).loss;
    // bf16 keeps 8 mantissa bits: per-op relative error ~4e-3; the loss stays within 2%.
    EXPECT_NEAR(b, a, 0.02 * a) << "step " << step;
  }
  // the compute weights really are bf16 values
  for (float w : compute_weights(bf16)) {
    std::uint32_t u;
    std::memcpy(&u, &w, 4);
    ASSERT_EQ(u & 0xffffu, 0u);
  }
}

TEST(LrSchedule, WarmupThenEachShape) {
  LrSchedule s;
  s.peak_lr = 1.0;
  s.warmup_steps = 10;
  s.total_steps = 110;
  for (const char* type : {"constant", "constant_with_warmup", "linear", "cosine", "cosine_with_min_lr"}) {
    s.type = type;
    s.min_lr_rate = 0.1;
    EXPECT_DOUBLE_EQ(s.at(0), 0.0) << type;
    EXPECT_DOUBLE_EQ(s.at(5), 0.5) << type;
    EXPECT_DOUBLE_EQ(s.at(10), 1.0) << type;
  }
  for (const char* type : {"constant", "constant_with_warmup"}) {
    s.type = type;
    EXPECT_DOUBLE_EQ(s.at(100), 1.0) << type;
  }
  s.type = "linear";
  EXPECT_DOUBLE_EQ(s.at(60), 0.5);
  EXPECT_DOUBLE_EQ(s.at(110), 0.0);
  s.type = "cosine";
  EXPECT_NEAR(s.at(60), 0.5, 1e-12);
  EXPECT_NEAR(s.at(35), 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  EXPECT_NEAR(s.at(110), 0.0, 1e-12);
  s.type = "cosine_with_min_lr";
  EXPECT_NEAR(s.at(110), 0.1, 1e-12);
  EXPECT_NEAR(s.at(60), 0.1 + 0.9 * 0.5, 1e-12);
  s.type = "bogus";
  EXPECT_THROW(s.at(50), std::invalid_argument);
}

TEST(LrSchedule, WarmupRatioRoundsUp) {
  EXPECT_EQ(resolve_warmup_steps(0, 0.05, 101), 6);
  EXPECT_EQ(resolve_warmup_steps(7, 0.5, 100), 7);
  EXPECT_EQ(resolve_warmup_steps(0, 0.0, 100), 0);
}

}  // namespace
}  // namespace shardft
