// Hybrid sharding: 4 ranks as 2 nodes x 2 (ranks_per_node = 2), shard groups of a node, replica groups
// across nodes. Every sharded stage reproduces one rank on the global batch (fp32, 1e-5), and the
// ledger splits the bytes into intra- and inter-node.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/self_communicator.hpp"
#include "parallel/parallel_plan.hpp"
#include "config/recipe_sections.hpp"
#include "zero_test_util.hpp"

namespace shardft {
namespace {

TEST(HybridSharding, TwoNodesOfTwoMatchOneRank) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 4) GTEST_SKIP() << "the 2 x 2 layout needs exactly 4 ranks (run at np 4)";
  for (int stage = 1; stage <= 3; ++stage) {
    TrainConfig cfg = tiny(stage, 2, stage != 2);
    cfg.ranks_per_node = 2;
    cfg.sharding_strategy = stage == 2 ? "_HYBRID_SHARD_ZERO2" : "";  // a node, by FSDP's name
    cfg.shard_group_size = stage == 2 ? 0 : 2;
    const ParallelPlan g = ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
    const Topology& topo = g.topology();
    ASSERT_EQ(g.dims().shard, 2);
    ASSERT_EQ(g.dims().replicas, 2);
    ASSERT_TRUE(g.world().ledger().crosses_nodes());
    ASSERT_FALSE(g.shard().ledger().crosses_nodes());
    ASSERT_NE(g.replica(), nullptr);
    ASSERT_TRUE(g.replica()->ledger().crosses_nodes());
    const int steps = 5;
    const long per_step = long(cfg.per_device_train_batch_size) * cfg.gradient_accumulation_steps * n;
    const auto data = samples(static_cast<int>(per_step * steps));
    const StepPlan plan{per_step, steps, steps};
    const auto order = epoch_permutation(static_cast<std::int64_t>(data.size()), cfg.seed, 0);
    Trainer hybrid(cfg, steps, g);
    TrainConfig ref_cfg = cfg;
    ref_cfg.zero_stage = 0;
    ref_cfg.sharding_strategy = "";
    SelfCommunicator self;
    Trainer reference(ref_cfg, steps, self);
    double inter = 0, intra = 0;
    for (int s = 0; s < steps; ++s) {
      const StepBatches batches = step_batches(cfg, data, plan, order, s, topo.world_rank, n);
      const StepStats a = hybrid.step(batches.mine);
      const StepStats b = reference.step({batches.global});
      EXPECT_NEAR(a.loss, b.loss, 1e-5 * b.loss) << "stage " << stage << " step " << s;
      inter += a.comm_bytes_inter_node;
      intra += a.comm_bytes_intra_node;
      EXPECT_DOUBLE_EQ(a.comm_bytes, a.comm_bytes_inter_node + a.comm_bytes_intra_node);
    }
    const double diff = rel_diff(hybrid.engine().gather_master(), reference.engine().gather_master());
    EXPECT_LT(diff, 1e-5) << "stage " << stage;
    // Within a node the shard group moves the model; across nodes only the replica all-reduce of the
    // gradient shard (2 x psi/2 x (2-1)/2 elements) and a few scalars.
    const double psi = static_cast<double>(hybrid.model().layout().total_numel());
    EXPECT_GT(intra, 0.0);
    EXPECT_NEAR(inter / steps, 4 * psi / 2, 0.05 * 4 * psi / 2) << "stage " << stage;
    if (topo.world_rank == 0) {
      std::printf("  hybrid 2x2 stage %d: weights differ by %.2e; per step %.0f B intra-node, %.0f B inter-node\n",
                  stage, diff, intra / steps, inter / steps);
    }
  }
}

}  // namespace
}  // namespace shardft
