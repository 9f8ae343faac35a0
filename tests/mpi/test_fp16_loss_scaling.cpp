// fp16 with dynamic loss scaling over the job's ranks: an overflow injected into one rank's gradient
// (Trainer::poison_next_gradient) skips that step on every rank (master weights bit-identical, the
// optimizer and LR schedule not advanced), halves the scale, and training then goes on; the whole run
// equals one rank (stage 0, the global batch, the same injected steps) at every stage.
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

class Fp16LossScaling : public ::testing::TestWithParam<int> {};

TEST_P(Fp16LossScaling, AnInjectedOverflowOnOneRankIsSkippedEverywhereAndTrainingRecovers) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int N = world.size(), steps = 7;
  TrainConfig cfg = tiny(GetParam(), 2, true);
  cfg.fp16 = true;
  cfg.initial_scale_power = 10;
  cfg.hysteresis = 1;  // every overflow halves
  cfg.loss_scale_window = 3;
  cfg.warmup_steps = 0;  // every applied step moves the weights
  const std::vector<bool> poisoned = {false, true, true, false, false, false, false};
  const long per_step = long(cfg.per_device_train_batch_size) * cfg.gradient_accumulation_steps * N;
  const auto data = samples(static_cast<int>(per_step * steps));
  StepPlan plan{per_step, steps, steps};
  const auto order = epoch_permutation(static_cast<std::int64_t>(data.size()), cfg.seed, 0);
  Trainer sharded(cfg, steps, world);
  TrainConfig ref_cfg = cfg;
  ref_cfg.zero_stage = 0;
  SelfCommunicator self;
  Trainer reference(ref_cfg, steps, self);
  // Expected scale after each step: 1024, overflow 512, overflow 256, then 3 good steps double it.
  const std::vector<double> scale_after = {1024, 512, 256, 256, 256, 512, 512};
  double worst_loss = 0, previous_lr = -1;
  for (int s = 0; s < steps; ++s) {
    const StepBatches batches = step_batches(cfg, data, plan, order, s, world.rank(), N);
    const std::vector<float> before = sharded.engine().gather_master();
    const long optimizer_steps = sharded.steps_done();
    if (poisoned[s] && world.rank() == N - 1) sharded.poison_next_gradient();  // one rank only
    if (poisoned[s]) reference.poison_next_gradient();
    const StepStats a = sharded.step(batches.mine);
    const StepStats b = reference.step({batches.global});
    const std::vector<float> after = sharded.engine().gather_master();
    EXPECT_EQ(a.skipped, poisoned[s]) << "rank " << world.rank() << " step " << s;
    EXPECT_EQ(b.skipped, poisoned[s]) << "step " << s;
    EXPECT_EQ(sharded.loss_scaler().scale(), scale_after[s]) << "step " << s;
    EXPECT_EQ(reference.loss_scaler().scale(), scale_after[s]) << "step " << s;
    EXPECT_TRUE(std::isfinite(a.loss)) << "step " << s;
    if (poisoned[s]) {
      EXPECT_TRUE(after == before) << "a skipped step changed the master weights, step " << s;
      EXPECT_EQ(sharded.steps_done(), optimizer_steps) << "step " << s;
    } else {
      EXPECT_FALSE(after == before) << "step " << s;
      EXPECT_TRUE(std::isfinite(a.grad_norm)) << "step " << s;
      EXPECT_EQ(sharded.steps_done(), optimizer_steps + 1) << "step " << s;
      worst_loss = std::max(worst_loss, std::abs(a.loss - b.loss) / b.loss);
    }
    // DeepSpeed does not step the LR scheduler on a skipped step: the next step uses the skipped one's rate.
    if (s > 0) {
      EXPECT_EQ(a.learning_rate == previous_lr, poisoned[s - 1]) << "step " << s;
    }
    previous_lr = a.learning_rate;
  }
  EXPECT_EQ(sharded.loss_scaler().skipped_steps(), 2);
  EXPECT_EQ(sharded.steps_done(), steps - 2);
  const double diff = rel_diff(sharded.engine().gather_master(), reference.engine().gather_master());
  if (world.rank() == 0) {
    std::printf("  fp16 stage %d, %d ranks vs 1 rank: worst loss difference %.2e, final weights %.2e (relative)\n",
                GetParam(), N, worst_loss, diff);
  }
  // As bf16's (test_zero_equivalence.cpp): a master on a rounding boundary may round one fp16 ulp apart.
  // The final weights' difference depends on the BLAS kernels' summation order: 1.017e-4 at 4 ranks with
  // OpenBLAS's Haswell kernels (an AMD EPYC), under 1e-4 elsewhere; a fifth of an fp16 ulp (4.9e-4).
  EXPECT_LT(worst_loss, 1e-4);
  EXPECT_LT(diff, 2e-4);
}

INSTANTIATE_TEST_SUITE_P(Stages, Fp16LossScaling, ::testing::Values(1, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

// An overflow at min_loss_scale fails the step on every rank, naming the first parameter whose gradient
// is not finite.
TEST(Fp16LossScalingAtMinimum, AnOverflowThereFailsNamingTheParameter) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int N = world.size();
  TrainConfig cfg = tiny(2, 1, true);
  cfg.fp16 = true;
  cfg.initial_scale_power = 1;
  cfg.min_loss_scale = 2;
  cfg.hysteresis = 1;
  const auto data = samples(2 * N);
  Trainer tr(cfg, 2, world);
  if (world.rank() == 0) tr.poison_next_gradient();
  try {
    tr.step({collate(data, {2 * world.rank(), 2 * world.rank() + 1})});
    ADD_FAILURE() << "an overflow at min_loss_scale did not fail";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("overflows (inf or NaN) at the minimum loss scale 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("first parameter with a non-finite gradient: model.embed_tokens.weight"), std::string::npos)
        << msg;
  }
}

}  // namespace
}  // namespace shardft
