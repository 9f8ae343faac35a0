// The memory preflight on a real MPI job: when one rank cannot fit, every rank refuses together,
// naming that rank (no rank goes on to allocate and wait in a collective for the others), and the
// persistent estimate of a sharded rank is what its engine allocates.
#include <gtest/gtest.h>

#include <string>

#include "parallel/estimate/memory_preflight.hpp"
#include "parallel/parallel_plan.hpp"
#include "config/recipe_sections.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {

TEST(MemoryPreflightMpi, OneRankOverItsBudgetStopsEveryRank) {
  TrainConfig cfg;
  const ParallelPlan plan = ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
  const int r = plan.world().rank(), last = plan.world().size() - 1;
  RankMemoryEstimate need;
  need.optimizer = 3e6;
  // Only the last rank is short of memory; the others have plenty or no budget at all.
  const RankMemoryBudget budget = r == last ? RankMemoryBudget{1e6, "test budget"}
                                            : (r % 2 ? RankMemoryBudget{-1, "unknown"} : RankMemoryBudget{1e9, "big"});
  try {
    check_rank_memory(need, budget, plan.host_world());
    FAIL() << "rank " << r << " went on";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank " + std::to_string(last) + " needs about 2.86 MiB but has 977 KiB"), std::string::npos)
        << what;
  }
  check_rank_memory(need, RankMemoryBudget{1e7, "enough"}, plan.host_world());  // fits everywhere: no throw
}

// Every stage (stage 0 pads its units to N ranks' alignment too); with LoRA the frozen base is a second,
// compute-weights-only partition of the blocks; with QLoRA its matrices are NF4 bytes (sharded at stage
// 3), and after two steps the NF4 part of the transient estimate is the most this rank held of them.
TEST(MemoryPreflightMpi, ShardedPersistentEstimateIsWhatTheEngineAllocates) {
  ByteTokenizer tok;
  std::vector<TokenizedSample> samples;
  for (int i = 0; i < 4; ++i) {
    samples.push_back(apply_chat_template(tok, {{"user", "upper: " + std::string(10 + 5 * i, 'a')},
                                                {"assistant", std::string(10 + 5 * i, 'A')}}, 64));
  }
  const TokenBatch batch = collate(samples, {0, 1, 2, 3});  // every rank's: the values do not matter here
  for (const std::string peft : {"", "LoRA", "QLoRA"}) {
    for (int stage = 0; stage <= 3; ++stage) {
      for (bool bf16 : {false, true}) {
        TrainConfig cfg;
        cfg.model.vocab_size = 300;
        cfg.model.hidden_size = 64;
        cfg.model.num_hidden_layers = 2;
        cfg.model.num_attention_heads = 4;
        cfg.model.num_key_value_heads = 2;
        cfg.model.intermediate_size = 96;
        cfg.zero_stage = stage;
        cfg.bf16 = bf16;
        cfg.max_memory_per_rank = "none";
        if (!peft.empty()) {
          cfg.use_peft = true;
          cfg.lora_r = 4;
          cfg.lora_dropout = 0;
          cfg.lora_target_modules = "all-linear";
          cfg.load_in_4bit = peft == "QLoRA";
        }
        const ParallelPlan plan = ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
        Trainer tr(cfg, 10, plan);
        const MemoryReport m = tr.engine().memory();
        const RankMemoryEstimate& e = tr.memory_estimate();
        SCOPED_TRACE(peft + " stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32"));
        EXPECT_EQ(e.weights, static_cast<double>(m.weights));
        EXPECT_EQ(e.frozen_weights, static_cast<double>(m.frozen_weights));
        EXPECT_EQ(e.grads, static_cast<double>(m.grads));
        EXPECT_EQ(e.optimizer, static_cast<double>(m.optimizer));
        if (!peft.empty()) {
          EXPECT_GT(m.frozen_weights, 0);
        }
        if (peft != "QLoRA") continue;
        for (int s = 0; s < 2; ++s) tr.step({batch});
        const MemoryReport after = tr.engine().memory();
        EXPECT_GT(after.peak_nf4_transient, 0);
        EXPECT_EQ(e.nf4_transient, static_cast<double>(after.peak_nf4_transient));
        EXPECT_GE(after.peak_gathered, after.peak_nf4_transient);
      }
    }
  }
}

}  // namespace
}  // namespace shardft
