// `shardft estimate` with LoRA / QLoRA: the trainable count is the real model's, r * (in + out) summed by
// hand; the frozen base bytes agree with what the trainer allocates (MemoryReport at one rank) and with the
// exact per-rank model (memory preflight) at 4 shards, within the partition's padding; traffic by hand.
#include <gtest/gtest.h>

#include <string>

#include "tests/common/self_communicator.hpp"
#include "config/lora_config.hpp"
#include "kernels/nf4_quantize.hpp"
#include "parallel/flat_partition.hpp"
#include "parallel/estimate/lora_estimate.hpp"
#include "parallel/estimate/memory_preflight.hpp"
#include "config/recipe_sections.hpp"
#include "train/trainer.hpp"
#include "tests/common/small_model.hpp"

namespace shardft {
namespace {

// testing_util::small_model: d 64, 4 heads of 16 (q 64), 2 KV heads (k/v 32), I 96, 3 layers, vocab 300.
TrainConfig lora_model(int stage, bool bf16, const std::string& targets) {
  TrainConfig c = testing_util::small_model(stage, bf16);
  c.use_peft = true;
  c.lora_r = 4;
  c.lora_dropout = 0;
  c.lora_target_modules = targets;
  return c;
}

// Base parameters of lora_model: embed + lm_head 2 x 300 x 64, per layer q/o 64 x 64, k/v 32 x 64,
// gate/up/down 96 x 64 and 2 norms of 64, the final norm 64.
constexpr double kBaseParams = 2 * 300 * 64 + 3 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 96 * 64 + 2 * 64) + 64;

TEST(LoraEstimate, TrainableCountIsTheModelsTrainableParams) {
  // r (in + out) per targeted matrix, r = 4: q 4 (64+64) = 512, k = v = 4 (64+32) = 384, o 512,
  // gate = up = down = 4 (64+96) = 640; three layers.
  const struct {
    const char* targets;
    double by_hand;
  } cases[] = {{"all-linear", 3 * (512 + 384 + 384 + 512 + 3 * 640)}, {"", 3 * (512 + 384)}, {"[up_proj]", 3 * 640}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string("lora_target_modules '") + c.targets + "'");
    const TrainConfig cfg = lora_model(0, false, c.targets);
    Trainer tr(cfg, 10, self());
    double trainable = 0, frozen = 0;
    for (const ParamSpec& p : tr.model().layout().params()) (p.frozen ? frozen : trainable) += p.numel();
    const LoraSize s = lora_size(cfg.model, lora_spec(cfg));
    EXPECT_EQ(s.trainable, c.by_hand);
    EXPECT_EQ(s.trainable, trainable);
    EXPECT_EQ(s.frozen, frozen);
    EXPECT_EQ(s.frozen, kBaseParams);
    EXPECT_EQ(s.frozen_nf4, 0);
  }
}

// The partition pads each of its units (one per block) to a multiple of N * kAlign elements, and NF4 keeps
// its second-level scales and offset whole on every rank: the exact models may exceed the estimate by that.
double padding_bound(const ParamLayout& layout, double compute_bytes, int shards, int stage) {
  double nf4_whole = 0;
  for (const ParamSpec& p : layout.params()) {
    if (p.nf4) nf4_whole += 4.0 * static_cast<double>(nf4_absmax_blocks(p.numel())) + 4 + 2;
  }
  const double units = static_cast<double>(layout.blocks().size());
  return compute_bytes * FlatPartition::kAlign * units * (stage == 3 ? 1 : shards) + nf4_whole;
}

TEST(LoraEstimate, FrozenBaseBytesAreWhatTheTrainerAllocatesAtOneRank) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32"));
      const TrainConfig cfg = lora_model(stage, bf16, "all-linear");
      Trainer tr(cfg, 10, self());
      const MemoryReport m = tr.engine().memory();
      const double compute = bf16 ? 2 : 4;
      const LoraSize s = lora_size(cfg.model, lora_spec(cfg));
      const LoraStateRow row = estimate_lora_states(s, model_size(cfg.model), 1, 1, compute)[stage];
      EXPECT_EQ(row.frozen, compute * kBaseParams);
      const double real = static_cast<double>(m.frozen_weights);
      EXPECT_GE(real, row.frozen);
      EXPECT_LE(real - row.frozen, padding_bound(tr.model().layout(), compute, 1, stage));
      // A and B's fp32 master + Adam state: 12 bytes a trainable parameter, as in DeepSpeed's formula.
      EXPECT_NEAR(static_cast<double>(m.optimizer), 12 * s.trainable, 12.0 * FlatPartition::kAlign * 5);
    }
  }
}

TEST(LoraEstimate, FrozenBaseBytesAgreeWithThePreflightAtFourShards) {
  for (bool qlora : {false, true}) {
    for (int stage : {0, 3}) {
      SCOPED_TRACE(std::string(qlora ? "QLoRA" : "LoRA") + " stage " + std::to_string(stage));
      TrainConfig cfg = lora_model(stage, true, "all-linear");
      cfg.load_in_4bit = qlora;
      const LoraSpec spec = lora_spec(cfg);
      const ParamLayout layout(cfg.model, spec);
      ZeroConfig zero;
      zero.stage = stage;
      zero.dtype = ComputeDtype::bf16;
      const RankMemoryEstimate exact = estimate_rank_memory(cfg.model, layout, zero, 4, activation_shape(cfg));
      const LoraSize s = lora_size(cfg.model, spec);
      const LoraStateRow row = estimate_lora_states(s, model_size(cfg.model), 1, 4, 2.0)[stage];
      EXPECT_GE(exact.frozen_weights, row.frozen);
      EXPECT_LE(exact.frozen_weights - row.frozen, padding_bound(layout, 2.0, 4, stage));
      if (qlora) {
        // The seven decoder matrices of each layer are NF4: 4 bits each plus one 8-bit absmax per 64 values.
        EXPECT_EQ(s.frozen_nf4, 3 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 96 * 64));
        EXPECT_NEAR(s.nf4_bytes / s.frozen_nf4, 0.5 + 1.0 / 64, 0.01);
        EXPECT_LT(row.frozen, 2.0 * kBaseParams / (stage == 3 ? 4 : 1));  // less than the same base in bf16
      }
    }
  }
}

TEST(LoraEstimate, TrafficReducesOnlyAdaptersBelowStageThreeAndGathersTheBaseAtThree) {
  const TrainConfig cfg = lora_model(3, true, "all-linear");
  const LoraSize s = lora_size(cfg.model, lora_spec(cfg));
  const double share = 7.0 / 8, T = s.trainable, F = kBaseParams;  // 8 GPUs on one node, bf16 on the wire
  const auto rows = estimate_lora_traffic(s, 1, 8, 2, 2);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].intra_node, 2 * T * share * 2);  // ring all-reduce of the A/B gradients
  EXPECT_DOUBLE_EQ(rows[1].intra_node, T * share * (2 + 2));  // their reduce-scatter and the weights' all-gather
  EXPECT_DOUBLE_EQ(rows[2].intra_node, (2 * F * 2 + 3 * T * 2) * share);  // base twice, A/B twice + grads once
  for (const TrafficRow& r : rows) EXPECT_EQ(r.inter_node, 0);
  const auto two_nodes = estimate_lora_traffic(s, 2, 4, 2, 2);  // a group spanning nodes counts as inter-node
  EXPECT_DOUBLE_EQ(two_nodes[2].inter_node, rows[2].intra_node);
}

}  // namespace
}  // namespace shardft
