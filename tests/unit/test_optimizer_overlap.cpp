// The optimizer step overlapped with the next forward (optimizer_overlap): the update runs unit by unit
// on a queue of its own (kernels/side_queue) and the forward waits for a unit only before reading it. The
// arithmetic is the same, so every step equals the step without overlap bit for bit; on a GPU build the
// queue is a second CUDA stream, and these tests check the ordering the marks promise.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tests/common/self_communicator.hpp"
#include "data/sft_data.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/side_queue.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {

TrainConfig tiny_config() {
  TrainConfig c;
  c.model.vocab_size = ByteTokenizer::kVocabSize;
  c.model.hidden_size = 32;
  c.model.num_hidden_layers = 3;
  c.model.num_attention_heads = 4;
  c.model.num_key_value_heads = 2;
  c.model.intermediate_size = 48;
  c.learning_rate = 1e-2;
  c.lr_scheduler_type = "constant";
  c.max_grad_norm = 0.5;  // clipping on: the update reads the clip factor the compute stream wrote
  c.weight_decay = 0.1;
  c.logits_chunk_tokens = 16;
  c.seed = 11;
  return c;
}

std::vector<TokenBatch> micro_batches(int step) {
  ByteTokenizer tok;
  std::vector<TokenizedSample> s;
  s.push_back(apply_chat_template(tok, {{"user", "upper: abc" + std::to_string(step)}, {"assistant", "ABC"}}, 48));
  s.push_back(apply_chat_template(tok, {{"user", "upper: qwerty"}, {"assistant", "QWERTY" + std::to_string(step)}}, 48));
  return {collate(s, {0, 1}), collate(s, {1, 0})};
}

struct OverlapVariant {
  const char* name;
  bool bf16, tied;
};

class OptimizerOverlap : public testing::TestWithParam<OverlapVariant> {};

// Five steps of two micro-batches with and without overlap: the same losses, norms and master weights,
// and reading the weights between steps (as a checkpoint or an evaluation does) sees the update done.
TEST_P(OptimizerOverlap, StepsEqualTheStepsWithoutOverlapBitForBit) {
  const OverlapVariant v = GetParam();
  TrainConfig cfg = tiny_config();
  cfg.bf16 = v.bf16;
  cfg.model.tie_word_embeddings = v.tied;
  cfg.optimizer_overlap = "false";  // auto is on in a GPU build
  TrainConfig overlapped_cfg = cfg;
  overlapped_cfg.optimizer_overlap = "true";
  Trainer plain(cfg, 10, self());
  Trainer overlapped(overlapped_cfg, 10, self());
  for (int step = 0; step < 5; ++step) {
    const auto batches = micro_batches(step);
    const StepStats a = plain.step(batches);
    const StepStats b = overlapped.step(batches);
    EXPECT_EQ(a.loss, b.loss) << "step " << step;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step;
    if (step % 2 == 1) {
      EXPECT_TRUE(plain.engine().gather_master() == overlapped.engine().gather_master()) << "step " << step;
    }
  }
  EXPECT_TRUE(plain.engine().gather_master() == overlapped.engine().gather_master());
  EXPECT_EQ(plain.steps_done(), overlapped.steps_done());
}

INSTANTIATE_TEST_SUITE_P(Variants, OptimizerOverlap,
                         testing::Values(OverlapVariant{"fp32", false, false}, OverlapVariant{"bf16", true, false},
                                         OverlapVariant{"bf16_tied", true, true}),
                         [](const testing::TestParamInfo<OverlapVariant>& i) { return std::string(i.param.name); });

// optimizer_overlap_sms (SMs the GEMMs leave to the overlapped update): the steps stay those without
// overlap, bit for bit on the host (nothing runs beside anything there, and the log says the SMs do
// nothing) and within rounding on a GPU (GEMMs sized for fewer SMs may pick another algorithm). It is
// refused with overlap switched off, and where it would leave the GEMMs no SM (kernels/side_queue).
TEST(OptimizerOverlap, SmsLeftToTheUpdateKeepTheSteps) {
  TrainConfig cfg = tiny_config();
  cfg.bf16 = true;
  cfg.optimizer_overlap = "false";
  TrainConfig reserved_cfg = cfg;
  reserved_cfg.optimizer_overlap = "true";
  reserved_cfg.optimizer_overlap_sms = 4;
  Trainer plain(cfg, 10, self());
  Trainer reserved(reserved_cfg, 10, self());
  const std::string where = reserved.engine().optimizer_overlap_description();
  EXPECT_NE(where.find(kComputeOnDevice ? "leaving 4 to it" : "optimizer_overlap_sms has no effect"),
            std::string::npos)
      << where;
  for (int step = 0; step < 3; ++step) {
    const auto batches = micro_batches(step);
    const StepStats a = plain.step(batches);
    const StepStats b = reserved.step(batches);
    if (kComputeOnDevice) {
      EXPECT_NEAR(a.loss, b.loss, 1e-3 * a.loss) << "step " << step;
    } else {
      EXPECT_EQ(a.loss, b.loss) << "step " << step;
      EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << step;
    }
  }
  if (!kComputeOnDevice) {
    EXPECT_TRUE(plain.engine().gather_master() == reserved.engine().gather_master());
  }
  EXPECT_THROW(SideQueue(1, -1), std::invalid_argument);
  try {
    load_train_config("", {"--optimizer_overlap=false", "--optimizer_overlap_sms=4"});
    FAIL() << "optimizer_overlap_sms with optimizer_overlap false was accepted";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("optimizer_overlap_sms = 4"), std::string::npos) << what;
    EXPECT_NE(what.find("optimizer_overlap = false"), std::string::npos) << what;
  }
}

TEST(OptimizerOverlap, NeedsStage0) {
  TrainConfig cfg = tiny_config();
  cfg.optimizer_overlap = "true";
  cfg.zero_stage = 2;
  try {
    Trainer t(cfg, 10, self());
    FAIL() << "optimizer_overlap at zero_stage 2 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer_overlap needs zero_stage 0"), std::string::npos) << e.what();
  }
}

// auto: on at stage 0 of a full fine-tune where side queues are queues of their own; what is set wins.
TEST(OptimizerOverlap, AutoIsOnAtStage0OfAFullFineTuneWithQueuesOfItsOwn) {
  TrainConfig cfg = tiny_config();
  EXPECT_EQ(cfg.optimizer_overlap, "auto");
  EXPECT_TRUE(optimizer_overlaps(cfg, true));
  EXPECT_FALSE(optimizer_overlaps(cfg, false)) << "one queue: nothing to overlap";
  TrainConfig stage2 = cfg;
  stage2.zero_stage = 2;
  EXPECT_FALSE(optimizer_overlaps(stage2, true));
  TrainConfig lora = cfg;
  lora.use_peft = true;
  EXPECT_FALSE(optimizer_overlaps(lora, true));
  cfg.optimizer_overlap = "false";
  EXPECT_FALSE(optimizer_overlaps(cfg, true));
  cfg.optimizer_overlap = "true";
  EXPECT_TRUE(optimizer_overlaps(cfg, false)) << "asked for: the CPU runs the same step";
  stage2.zero_stage = 1;
  stage2.optimizer_overlap = "auto";
  Trainer t(stage2, 10, self());  // auto at stage 1 is not a request the engine refuses
  EXPECT_TRUE(t.engine().optimizer_overlap_description().empty());
  EXPECT_EQ(SideQueue::separate_queues(), kComputeOnDevice);
}

// y = x + 1 on `space` (the side queue's kernel of the chain below).
void add_one_on(const ExecSpace& space, View1<float> x, View1<float> y) {
  Kokkos::parallel_for(
      "side_add_one", Kokkos::RangePolicy<ExecSpace>(space, 0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { y(i) = x(i) + 1.f; });
}

// A chain across the two queues: the compute stream writes x, the side queue (after follow_compute)
// writes y = x + 1, the compute stream (after wait_for) writes z = 2 y. Large enough that, were a wait
// missing on a GPU, the reader would start before the writer is done.
TEST(SideQueue, MarksOrderWorkBetweenTheQueues) {
  const std::size_t n = std::size_t(1) << 22;
  View1<float> x("x", n), y("y", n), z("z", n);
  SideQueue side(2);
  for (int round = 0; round < 3; ++round) {
    Kokkos::deep_copy(ExecSpace(), x, static_cast<float>(round));
    side.follow_compute();
    add_one_on(side.space(), x, y);
    side.mark(round % 2);
    side.wait_for(round % 2);
    Kokkos::deep_copy(ExecSpace(), z, y);  // on the compute stream: reads y only after the mark
    scale_inplace(z, 2.f);
    auto host = Kokkos::create_mirror_view_and_copy(HostSpace(), z);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += host(i) != 2.f * static_cast<float>(round + 1);
    EXPECT_EQ(wrong, 0u) << "round " << round;
  }
  EXPECT_THROW(side.mark(2), std::out_of_range);
  EXPECT_THROW(side.wait_for(-1), std::out_of_range);
  EXPECT_EQ(side.separate(), kComputeOnDevice);
  // A GPU's side stream runs below the compute stream (lower numbers run first); the host has one queue.
  EXPECT_NE(side.describe().find(kComputeOnDevice ? "under the compute stream's -" : "the compute queue itself"),
            std::string::npos)
      << side.describe();
}

}  // namespace
}  // namespace shardft
