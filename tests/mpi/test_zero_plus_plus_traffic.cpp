// ZeRO++ keeps the training step device-resident: with hpZ, qwZ and qgZ all on, steps after the first
// make no host<->device copy, host sync or allocation (kernels/device_traffic.hpp), with fp32 and with
// bf16 communication. 4 ranks run as 2 nodes x 2, 2 ranks as 2 nodes of one.
#include <gtest/gtest.h>

#include "kernels/device_traffic.hpp"
#include "parallel/parallel_plan.hpp"
#include "config/recipe_sections.hpp"
#include "zero_test_util.hpp"

namespace shardft {
namespace {

TEST(ZeroPlusPlusTraffic, StepsAfterTheFirstMoveOnlyTheirInputs) {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (n != 2 && n != 4) GTEST_SKIP() << "two nodes of n/2 ranks: run at np 2 or 4";
  install_device_traffic_hooks();
  for (const bool bf16 : {false, true}) {
    TrainConfig cfg = tiny(3, 2, true);
    cfg.ranks_per_node = n / 2;
    cfg.zero_hpz_partition_size = 2;
    cfg.zero_quantized_weights = cfg.zero_quantized_gradients = true;
    cfg.bf16 = bf16;
    cfg.communication_data_type = bf16 ? "bf16" : "fp32";
    const ParallelPlan plan = ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
    ASSERT_EQ(plan.topology().num_nodes, 2);
    const int steps = 3;
    const long per_step = long(cfg.per_device_train_batch_size) * cfg.gradient_accumulation_steps * n;
    const auto data = samples(static_cast<int>(per_step));
    const StepPlan sp{per_step, 1, 1};
    const auto order = epoch_permutation(static_cast<std::int64_t>(data.size()), cfg.seed, 0);
    // The same batches every step: a longer batch than any before would size the model's activation
    // buffers anew, which is not what this test is about.
    const auto batches = step_batches(cfg, data, sp, order, 0, plan.topology().world_rank, n).mine;
    Trainer tr(cfg, steps, plan);
    for (int s = 0; s < steps; ++s) {
      const StepStats st = tr.step(batches);
      const DeviceTraffic& hot = tr.last_step_traffic();
      if (s == 0) {
        EXPECT_GT(hot.allocations, 0) << "the first step sizes the buffers";
      } else {
        EXPECT_TRUE(hot.none_but_uploads()) << (bf16 ? "bf16" : "fp32") << " step " << s + 1 << ": " << hot.describe();
      }
      EXPECT_TRUE(std::isfinite(st.loss) && st.loss > 0);
    }
  }
}

}  // namespace
}  // namespace shardft
