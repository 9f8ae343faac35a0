// Overlapped, bucketed communication (reduce_bucket_size, allgather_bucket_size) computes the same
// step: at stages 1-3 with gradient accumulation, one unit per bucket (tiny), a few units per bucket
// (medium) and the whole model in one bucket (huge) each match one rank on the global batch within
// 1e-6 (fp32), and match each other bit for bit; the bytes on the wire per step do not change, only
// the number of reduce-scatter calls (one per bucket).
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "comm/mpi_communicator.hpp"
#include "comm/self_communicator.hpp"
#include "zero_test_util.hpp"

namespace shardft {
namespace {

struct BucketRun {
  std::vector<double> losses, bytes;
  std::vector<float> weights;
  std::int64_t calls = 0;
};

BucketRun train(MpiCommunicator& world, TrainConfig cfg, int steps) {
  const int N = world.size();
  const long per_step = long(cfg.per_device_train_batch_size) * cfg.gradient_accumulation_steps * N;
  const auto data = samples(static_cast<int>(per_step * steps));
  const StepPlan plan{per_step, steps, steps};
  const auto order = epoch_permutation(static_cast<std::int64_t>(data.size()), cfg.seed, 0);
  const bool reference = cfg.zero_stage == 0;
  SelfCommunicator self;
  Trainer tr(cfg, steps, reference ? static_cast<Communicator&>(self) : world);
  const std::int64_t calls_before = world.ledger().calls();
  BucketRun run;
  for (int s = 0; s < steps; ++s) {
    const StepBatches b = step_batches(cfg, data, plan, order, s, world.rank(), N);
    const StepStats st = reference ? tr.step({b.global}) : tr.step(b.mine);
    run.losses.push_back(st.loss);
    run.bytes.push_back(st.comm_bytes);
  }
  run.calls = world.ledger().calls() - calls_before;
  run.weights = tr.engine().gather_master();
  return run;
}

TEST(GradBuckets, EveryBucketSizeMatchesOneRankWithAccumulation) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int N = world.size(), steps = 4, accumulation = 3;
  for (int stage = 1; stage <= 3; ++stage) {
    for (bool tied : {true, false}) {
      TrainConfig cfg = tiny(stage, accumulation, tied);
      TrainConfig ref_cfg = cfg;
      ref_cfg.zero_stage = 0;
      const BucketRun ref = train(world, ref_cfg, steps);
      // Units in backward order: head, layers 2 and 1, embedding. Medium holds about two layers, so
      // the head and both layers share a bucket and the embedding goes alone.
      const std::int64_t layer = Trainer(cfg, 1, world).engine().partition().units()[1].padded;
      const std::string medium = std::to_string(2 * layer + layer / 2);
      struct Size {
        const char* name;
        std::string elements;
      };
      std::vector<BucketRun> runs;
      for (const Size& size : {Size{"tiny", "1"}, Size{"medium", medium}, Size{"huge", "1000000000000"}}) {
        cfg.reduce_bucket_size = cfg.allgather_bucket_size = size.elements;  // stage 3: prefetch window too
        runs.push_back(train(world, cfg, steps));
        const BucketRun& r = runs.back();
        const std::string what = "stage " + std::to_string(stage) + (tied ? " tied" : " untied") + ", " + size.name;
        for (int s = 0; s < steps; ++s) {
          EXPECT_NEAR(r.losses[s], ref.losses[s], 1e-6 * ref.losses[s]) << what << ", step " << s;
          // Bus bytes are (N-1)/N of each payload: equal up to the rounding of summing them differently.
          EXPECT_NEAR(r.bytes[s], runs.front().bytes[s], 1e-9 * r.bytes[s]) << what << ": bucketing changed the traffic";
        }
        const double diff = rel_diff(r.weights, ref.weights);
        EXPECT_LT(diff, 1e-6) << what;
        // The same reduce-scatters, summed in the same order per element, whatever the bucketing.
        EXPECT_TRUE(r.weights == runs.front().weights) << what << " differs from one unit per bucket";
        if (world.rank() == 0) {
          std::printf("  %s (%s elements), %d ranks: weights differ from one rank by %.2e, %lld calls\n", what.c_str(),
                      size.elements.c_str(), N, diff, static_cast<long long>(r.calls));
        }
      }
      if (N > 1 && stage >= 2) {  // 4 units: tiny sends 4 buckets per micro-batch, medium 2, huge 1
        EXPECT_EQ(runs[0].calls - runs[2].calls, 3 * accumulation * steps) << "stage " << stage;
        EXPECT_EQ(runs[1].calls - runs[2].calls, 1 * accumulation * steps) << "stage " << stage;
      }
    }
  }
}

// bf16 gradients (communication_data_type bf16) through buckets: each element is rounded and summed
// the same way whether its unit travels alone or coalesced, so tiny and huge buckets agree exactly.
TEST(GradBuckets, Bf16GradientsDoNotDependOnTheBucketSize) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  for (int stage = 2; stage <= 3; ++stage) {
    TrainConfig cfg = tiny(stage, 2, true);
    cfg.communication_data_type = "bf16";
    cfg.reduce_bucket_size = "1";
    const BucketRun tiny_run = train(world, cfg, 3);
    cfg.reduce_bucket_size = "1000000000000";
    const BucketRun huge_run = train(world, cfg, 3);
    EXPECT_EQ(tiny_run.losses, huge_run.losses) << "stage " << stage;
    EXPECT_TRUE(tiny_run.weights == huge_run.weights) << "stage " << stage;
  }
}

// The engine's transient buffers (gathered units, unit gradients, bucket staging) come from its pool.
// Every step asks for the same buffers. With blocking reductions, steps after the first allocate
// nothing. Overlapped, how many buckets are in flight at once is a matter of timing, so the first step
// need not have allocated all the pool will hold; but however the reductions interleave, a size never
// has more buffers than one step takes of it, so four steps together allocate at most what one step
// asks for (without the pool every step would allocate all it asks for), plus any buffer handed back
// while still referenced (dropped, not pooled).
TEST(GradBuckets, LaterStepsReuseTheFirstStepsBuffers) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const auto data = samples(4 * world.size());
  for (int stage = 2; stage <= 3; ++stage) {
    for (const char* bucket : {"1", "auto"}) {
      for (bool overlap : {false, true}) {
        TrainConfig cfg = tiny(stage, 2, false);
        cfg.reduce_bucket_size = bucket;
        Trainer tr(cfg, 4, world);
        tr.engine().set_overlap_comm(overlap);
        std::int64_t after_first = 0, takes_per_step = 0;
        for (int s = 0; s < 4; ++s) {
          tr.step({collate(data, {2 * world.rank()}), collate(data, {2 * world.rank() + 1})});
          if (s == 0) {
            after_first = tr.engine().buffer_pool().allocations();
            takes_per_step = tr.engine().buffer_pool().takes();
          }
        }
        const BufferPool& pool = tr.engine().buffer_pool();
        const std::int64_t later = pool.allocations() - after_first;
        const std::string what = "stage " + std::to_string(stage) + ", reduce_bucket_size " + bucket +
                                 (overlap ? ", overlapped" : ", blocking");
        EXPECT_GT(after_first, 0) << what;
        EXPECT_EQ(pool.takes(), 4 * takes_per_step) << what << ": steps asked for different buffers";
        if (overlap) {
          EXPECT_LE(pool.allocations(), takes_per_step + pool.drops())
              << what << ": " << pool.allocations() << " allocations in 4 steps, one step takes " << takes_per_step;
          EXPECT_LT(pool.allocations(), 4 * takes_per_step) << what << ": the pool saved nothing";
        } else {
          EXPECT_EQ(later, 0) << what << ": a later step allocated";
          EXPECT_EQ(pool.drops(), 0) << what;
        }
        EXPECT_GT(tr.engine().memory().pooled, 0) << what;
      }
    }
  }
}

}  // namespace
}  // namespace shardft
