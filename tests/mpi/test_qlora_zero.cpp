// QLoRA (load_in_4bit) at ZeRO stages 0-3 over the world's ranks equals QLoRA on one rank (this
// process, the whole batch): the losses of 3 AdamW steps, step 1's A/B gradients and A/B after 3 steps
// to 1e-5 relative (the gradient sums in another order), and the NF4 base the model reads is the same
// bytes on every rank count. At stage 3 each rank holds its shard of the NF4 bytes (nf4_held_bytes).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "comm/mpi_communicator.hpp"
#include "comm/self_communicator.hpp"
#include "tests/common/peft_fixture_run.hpp"

namespace shardft {
namespace {
using namespace testing_util;

// max |a - b| / max |b| over the trainable parameters.
double worst_trainable_error(const ParamLayout& layout, const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (spec.frozen) continue;
    const std::int64_t off = layout.offset(static_cast<int>(p));
    double diff = 0, scale = 0;
    for (std::int64_t i = off; i < off + spec.numel(); ++i) {
      diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
      scale = std::max(scale, std::abs(static_cast<double>(b[i])));
    }
    worst = std::max(worst, scale > 0 ? diff / scale : diff);
  }
  return worst;
}

TEST(QloraZero, EveryStageEqualsOneRank) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  SelfCommunicator self;
  const std::string name = "llama_all_linear";
  const TokenBatch whole = peft_fixture_batch(name), mine = peft_fixture_batch(name, world.rank(), world.size());
  for (int stage : {0, 1, 2, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage) + ", " + std::to_string(world.size()) + " ranks");
    const std::vector<std::string> flags = {"--zero_stage=" + std::to_string(stage), "--load_in_4bit=true"};
    Trainer one(peft_fixture_config(name, flags), 3, self);
    Trainer many(peft_fixture_config(name, flags), 3, world);
    const ParamLayout& layout = many.model().layout();
    const PeftFixtureRun ref = run_peft_fixture(one, whole, 3);
    const PeftFixtureRun run = run_peft_fixture(many, mine, 3);
    EXPECT_EQ(std::memcmp(ref.weights_before.data(), run.weights_before.data(), 4 * ref.weights_before.size()), 0);
    double loss_err = 0;
    for (int s = 0; s < 3; ++s) loss_err = std::max(loss_err, std::abs(run.losses[s] - ref.losses[s]) / ref.losses[s]);
    const double grad_err = worst_trainable_error(layout, run.grads_step1, ref.grads_step1);
    const double after_err = worst_trainable_error(layout, run.weights_after, ref.weights_after);
    EXPECT_LT(loss_err, 1e-5);
    EXPECT_LT(grad_err, 1e-5);
    EXPECT_LT(after_err, 1e-5);
    EXPECT_GT(run.memory.nf4_weights, 0);
    if (stage < 3) {
      EXPECT_EQ(run.memory.nf4_weights, ref.memory.nf4_weights);  // whole on every rank
    } else {
      // Each rank keeps ~1/N of the packed indices and absmax bytes (the fp32 scales stay whole).
      std::int64_t held = 0;
      for (const ParamSpec& p : layout.params()) held += p.nf4 ? nf4_held_bytes(p.numel(), world.size()) : 0;
      EXPECT_EQ(run.memory.nf4_weights, held);
      if (world.size() > 1) {
        EXPECT_LT(run.memory.nf4_weights, ref.memory.nf4_weights * 0.6);
      }
    }
    if (world.rank() == 0) {
      std::printf("[ qlora stage %d np %d ] losses %.9g %.9g %.9g; worst rel. error vs 1 rank: loss %.3g, step-1 "
                  "grads %.3g, after %.3g; NF4 bytes %lld\n",
                  stage, world.size(), run.losses[0], run.losses[1], run.losses[2], loss_err, grad_err, after_err,
                  static_cast<long long>(run.memory.nf4_weights));
    }
  }
}

// Stage 3 prefetches each layer's NF4 bytes with its units (forward: the next layer; backward: the one
// before), so no acquire waits for a gather it started itself: over a step every layer's bytes are
// gathered twice (forward and backward), always prefetched. Stages 0-2 gather none. The bytes gathered
// and dequantized at once are what the preflight estimated (nf4_peak_transient_bytes), fp32 and bf16.
TEST(QloraZero, Stage3PrefetchesTheNf4BytesAndCountsThem) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const std::string name = "llama_all_linear";
  const TokenBatch mine = peft_fixture_batch(name, world.rank(), world.size());
  const int steps = 2;
  for (int stage : {0, 1, 2, 3}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32") + ", " +
                   std::to_string(world.size()) + " ranks");
      std::vector<std::string> flags = {"--zero_stage=" + std::to_string(stage), "--load_in_4bit=true"};
      if (bf16) flags.push_back("--bf16=true");
      Trainer tr(peft_fixture_config(name, flags), 3, world);
      for (int s = 0; s < steps; ++s) tr.step({mine});
      const Nf4Weights* nf4 = tr.engine().frozen_part()->nf4();
      ASSERT_NE(nf4, nullptr);
      const Nf4GatherCounts& counts = nf4->gather_counts();
      const std::int64_t layers = tr.model().layout().num_layers();
      EXPECT_EQ(counts.at_acquire, 0);
      EXPECT_EQ(counts.prefetched, stage == 3 ? steps * 2 * layers : 0);
      const MemoryReport m = tr.engine().memory();
      EXPECT_EQ(static_cast<double>(m.peak_nf4_transient), tr.memory_estimate().nf4_transient);
      EXPECT_GE(m.peak_gathered, m.peak_nf4_transient);
      if (world.rank() == 0) {
        std::printf("[ qlora stage %d %s np %d ] NF4 gathers prefetched %lld, at acquire %lld; transient peak %lld B "
                    "(NF4 %lld B)\n",
                    stage, bf16 ? "bf16" : "fp32", world.size(), static_cast<long long>(counts.prefetched),
                    static_cast<long long>(counts.at_acquire), static_cast<long long>(m.peak_gathered),
                    static_cast<long long>(m.peak_nf4_transient));
      }
    }
  }
}

}  // namespace
}  // namespace shardft
