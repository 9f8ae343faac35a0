// LoRA dropout over the job's ranks: masks are keyed on (seed, step, layer, module, sample, position,
// column), never on where a token sits, so with lora_dropout 0.1 every ZeRO stage over N ranks (and two
// micro-batches each), in fp32 and in bf16 compute, equals one rank holding the step's whole global batch
// in one micro-batch: losses and the adapters after 3 steps to 1e-5 (norm-wise; 1e-4 per element). The
// adapters also differ from a run without dropout, so the masks are really drawn.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "comm/mpi_communicator.hpp"
#include "comm/self_communicator.hpp"
#include "train/run.hpp"
#include "train/trainer.hpp"
#include "zero_test_util.hpp"

namespace shardft {
namespace {

TrainConfig lora_tiny(int stage, double dropout, bool bf16 = false) {
  TrainConfig c = tiny(stage, 2, false);
  c.bf16 = bf16;
  c.use_peft = true;
  c.lora_r = 4;
  c.lora_alpha = 8;
  c.lora_target_modules = "all-linear";
  c.lora_dropout = dropout;
  return c;
}

// Over the LoRA factors: ||a - b|| / ||b||.
double factor_difference(const ParamLayout& layout, const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!spec.is_lora()) continue;
    const std::int64_t off = layout.offset(static_cast<int>(p));
    for (std::int64_t i = off; i < off + spec.numel(); ++i) {
      num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      den += double(b[i]) * b[i];
    }
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Worst over the LoRA factors of max |a - b| / max |b|: stricter, and where AdamW's normalised update
// turns summation-order noise in a small gradient into about 1e-5 with or without dropout.
double worst_factor_difference(const ParamLayout& layout, const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!spec.is_lora()) continue;
    const std::int64_t off = layout.offset(static_cast<int>(p));
    double diff = 0, scale = 0;
    for (std::int64_t i = off; i < off + spec.numel(); ++i) {
      diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
      scale = std::max(scale, std::abs(double(b[i])));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

struct Tolerances {
  double loss, adapters, worst_element;
};

// Every stage over the job's ranks against one rank holding the whole global batch, in fp32 or bf16 compute.
void expect_every_layout_equals_one_rank(bool bf16, Tolerances tol) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int N = world.size(), steps = 3;
  const TrainConfig base = lora_tiny(0, 0.1, bf16);
  const long per_step = long(base.per_device_train_batch_size) * base.gradient_accumulation_steps * N;
  const auto data = samples(static_cast<int>(per_step * steps));
  const StepPlan plan{per_step, steps, steps};
  const auto order = epoch_permutation(static_cast<std::int64_t>(data.size()), base.seed, 0);

  SelfCommunicator self;
  Trainer reference(base, steps, self), undropped(lora_tiny(0, 0.0, bf16), steps, self);
  std::vector<double> ref_losses;
  for (int s = 0; s < steps; ++s) {
    const StepBatches b = step_batches(base, data, plan, order, s, world.rank(), N);
    ref_losses.push_back(reference.step({b.global}).loss);
    undropped.step({b.global});
  }
  const std::vector<float> ref_after = reference.engine().gather_master();
  if (bf16) {  // the bf16 reference really rounds: its losses are not fp32's
    Trainer fp32(lora_tiny(0, 0.1, false), steps, self);
    const StepBatches b = step_batches(base, data, plan, order, 0, world.rank(), N);
    const double fp32_loss = fp32.step({b.global}).loss;
    EXPECT_GT(std::abs(fp32_loss - ref_losses[0]), 1e-6 * fp32_loss) << "bf16 step 1 loss equals fp32's";
  }
  const ParamLayout& layout = reference.model().layout();
  const double dropout_effect = worst_factor_difference(layout, undropped.engine().gather_master(), ref_after);
  EXPECT_GT(dropout_effect, 1e-3) << "dropout 0.1 trained the same adapters as no dropout";

  for (int stage : {0, 1, 2, 3}) {
    SCOPED_TRACE(std::string(bf16 ? "bf16" : "fp32") + " stage " + std::to_string(stage) + ", " + std::to_string(N) +
                 " ranks");
    Trainer tr(lora_tiny(stage, 0.1, bf16), steps, world);
    double loss_err = 0;
    for (int s = 0; s < steps; ++s) {
      const StepBatches b = step_batches(base, data, plan, order, s, world.rank(), N);
      const double loss = tr.step(b.mine).loss;
      loss_err = std::max(loss_err, std::abs(loss - ref_losses[s]) / ref_losses[s]);
    }
    const std::vector<float> after = tr.engine().gather_master();
    const double after_err = factor_difference(layout, after, ref_after);
    const double after_worst = worst_factor_difference(layout, after, ref_after);
    EXPECT_LT(loss_err, tol.loss);
    EXPECT_LT(after_err, tol.adapters);
    EXPECT_LT(after_worst, tol.worst_element);
    if (world.rank() == 0) {
      std::printf("[ lora %s dropout 0.1 stage %d np %d ] vs 1 rank: losses %.2e, adapters after 3 steps %.2e "
                  "(worst element %.2e; no dropout differs by %.2e)\n",
                  bf16 ? "bf16" : "fp32", stage, N, loss_err, after_err, after_worst, dropout_effect);
    }
  }
}

TEST(LoraDropoutZero, EveryStageAndLayoutEqualsOneRank) {
  expect_every_layout_equals_one_rank(false, {1e-5, 1e-5, 1e-4});
}

// bf16 rounds every activation gradient once before the layer's GEMMs read it (autocast's rounding point,
// model/linear.hpp LinearGrad). The ranks' fp32 partial sums differ from one rank's in the last bits, and
// where such a value lies on a bf16 rounding boundary it rounds one bf16 ulp (2^-8 relative) the other
// way: the adapters then drift apart by a fraction of a bf16 ulp, not of an fp32 one. Measured at 2-4
// ranks: norm-wise up to 5.6e-5 after 3 steps, worst element 2.2e-3 (AdamW's early steps move an element
// by about lr whatever the size of its gradient, flipped or not); losses within 2.3e-6.
TEST(LoraDropoutZero, Bf16EveryStageAndLayoutEqualsOneRank) {
  expect_every_layout_equals_one_rank(true, {1e-5, 2e-4, 1e-2});
}

}  // namespace
}  // namespace shardft
