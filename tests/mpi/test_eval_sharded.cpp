// Evaluation during training splits the eval set among the ranks (train/evaluate.hpp's evaluate_loss):
// at ZeRO stages 0 and 3, with batches that do not divide evenly among the ranks (some ranks run a
// repeated batch whose result is dropped, so stage 3's gathers stay matched), every rank gets the loss
// one rank computes over the whole set.
#include <gtest/gtest.h>

#include "comm/mpi_communicator.hpp"
#include "comm/self_communicator.hpp"
#include "train/evaluate.hpp"
#include "zero_test_util.hpp"

namespace shardft {
namespace {

TEST(EvalSharded, EveryRankGetsTheOneRankLoss) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int N = world.size();
  const auto train = samples(2 * 2 * N);
  const auto eval = samples(9);  // batches of 2: five, the last half full
  for (int stage : {0, 3}) {
    TrainConfig cfg = tiny(stage, 1, true);
    Trainer sharded(cfg, 2, world);
    TrainConfig ref_cfg = cfg;
    ref_cfg.zero_stage = 0;
    SelfCommunicator self;
    Trainer reference(ref_cfg, 2, self);
    StepPlan plan;
    plan.samples_per_step = 2L * N;
    plan.steps_per_epoch = 2;
    plan.total_steps = 2;
    const auto order = epoch_permutation(static_cast<std::int64_t>(train.size()), cfg.seed, 0);
    for (int s = 0; s < 2; ++s) {  // trained weights, not the initial ones
      const StepBatches batches = step_batches(cfg, train, plan, order, s, world.rank(), N);
      sharded.step(batches.mine);
      reference.step({batches.global});
    }
    const LossEval got = evaluate_loss(sharded.model(), sharded.engine(), eval, 2, 0, sharded.plan().host_world());
    const LossEval want = evaluate_loss(reference.model(), reference.engine(), eval, 9, 0, self);
    EXPECT_EQ(got.samples, 9);
    EXPECT_EQ(got.targets, want.targets) << "stage " << stage;
    EXPECT_GT(want.targets, 0);
    EXPECT_NEAR(got.eval_loss, want.eval_loss, 1e-5 * want.eval_loss) << "stage " << stage << ", " << N << " ranks";
    // The same number on every rank, bit for bit: it decides early stopping everywhere.
    double mine = got.eval_loss, lowest = 0, highest = 0;
    world.all_reduce(&mine, &highest, 1, DType::f64, ReduceOp::max);
    mine = -mine;
    world.all_reduce(&mine, &lowest, 1, DType::f64, ReduceOp::max);
    EXPECT_EQ(highest, -lowest) << "stage " << stage;
  }
}

}  // namespace
}  // namespace shardft
