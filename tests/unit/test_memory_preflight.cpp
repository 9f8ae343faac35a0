// The memory preflight: the persistent estimate equals what the engine allocates, the budget reads
// MemAvailable and cgroup limits, and a run that cannot fit is refused before its state is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/common/self_communicator.hpp"
#include "tests/common/device_build.hpp"
#include "config/memory_size.hpp"
#include "config/train_config.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/memory_capacity.hpp"
#include "parallel/estimate/memory_preflight.hpp"
#include "train/trainer.hpp"
#include "tests/common/small_model.hpp"

namespace shardft {
namespace {

using testing_util::small_model;

TEST(MemoryPreflight, PersistentEstimateIsWhatTheEngineAllocates) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (bool bf16 : {false, true}) {
      const TrainConfig cfg = small_model(stage, bf16);
      Trainer tr(cfg, 10, self());
      const MemoryReport m = tr.engine().memory();
      const RankMemoryEstimate& e = tr.memory_estimate();
      SCOPED_TRACE("stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32"));
      EXPECT_EQ(e.weights, static_cast<double>(m.weights));
      EXPECT_EQ(e.grads, static_cast<double>(m.grads));
      EXPECT_EQ(e.optimizer, static_cast<double>(m.optimizer));
      EXPECT_GT(e.activations, 0);
    }
  }
}

// Eight byte-tokenized chat samples of 27-76 tokens, one micro-batch.
TokenBatch upper_case_batch() {
  ByteTokenizer tok;
  std::vector<TokenizedSample> samples;
  for (int i = 0; i < 8; ++i) {
    samples.push_back(apply_chat_template(tok, {{"user", "upper: " + std::string(20 + 7 * i, 'a')},
                                                {"assistant", std::string(20 + 7 * i, 'A')}}, 128));
  }
  return collate(samples, {0, 1, 2, 3, 4, 5, 6, 7});
}

// LoRA: the frozen base counts as compute weights only (no gradient, master or optimizer state) and A/B
// as ordinary trainable parameters, as the two engines allocate them. QLoRA (load_in_4bit): the base
// matrices as NF4 bytes, and the transient estimate's NF4 part (a block's matrices dequantized; at stage
// 3 its gathered bytes and the prefetched block's) is the most the engine held over two steps.
TEST(MemoryPreflight, LoraEstimateIsWhatTheEngineAllocates) {
  for (bool qlora : {false, true}) {
    for (int stage = 0; stage <= 3; ++stage) {
      for (bool bf16 : {false, true}) {
        TrainConfig cfg = small_model(stage, bf16);
        cfg.use_peft = true;
        cfg.lora_r = 4;
        cfg.lora_dropout = 0;
        cfg.lora_target_modules = "all-linear";
        cfg.load_in_4bit = qlora;
        Trainer tr(cfg, 10, self());
        const MemoryReport m = tr.engine().memory();
        const RankMemoryEstimate& e = tr.memory_estimate();
        SCOPED_TRACE(std::string(qlora ? "QLoRA" : "LoRA") + " stage " + std::to_string(stage) +
                     (bf16 ? " bf16" : " fp32"));
        ASSERT_TRUE(tr.model().layout().has_frozen());
        EXPECT_GT(m.frozen_weights, 0);
        EXPECT_EQ(m.nf4_weights > 0, qlora);
        EXPECT_EQ(e.frozen_weights, static_cast<double>(m.frozen_weights));
        EXPECT_EQ(e.weights, static_cast<double>(m.weights));
        EXPECT_EQ(e.grads, static_cast<double>(m.grads));
        EXPECT_EQ(e.optimizer, static_cast<double>(m.optimizer));
        // Only A and B have optimizer state: far less than a full fine-tune's 12 bytes a parameter.
        EXPECT_LT(e.optimizer, 12.0 * static_cast<double>(tr.model().layout().total_numel()) / 4);
        if (!qlora) continue;
        for (int s = 0; s < 2; ++s) tr.step({upper_case_batch()});
        const MemoryReport after = tr.engine().memory();
        EXPECT_GT(after.peak_nf4_transient, 0);
        EXPECT_EQ(e.nf4_transient, static_cast<double>(after.peak_nf4_transient));
        EXPECT_GE(after.peak_gathered, after.peak_nf4_transient);
        EXPECT_GE(e.gathered, e.nf4_transient);
        std::printf("[ QLoRA stage %d %s ] NF4 transient peak %lld B (estimate %.0f B), peak_gathered %lld B\n", stage,
                    bf16 ? "bf16" : "fp32", static_cast<long long>(after.peak_nf4_transient), e.nf4_transient,
                    static_cast<long long>(after.peak_gathered));
      }
    }
  }
}

// A LoRA base read from a pretrained model passes through an fp32 staging buffer one unit (block) at a
// time: start-up holds the model state and, besides it, about the largest frozen block in fp32, not a
// second fp32 copy of the whole base (which, for a bf16 base, was twice its weights).
TEST(MemoryPreflight, PretrainedLoraBaseIsStagedOneBlockAtATime) {
  const std::string base = std::string(SHARDFT_REFERENCE_DIR) + "/hf/tiny_llama";
  for (int stage : {0, 3}) {
    for (bool bf16 : {false, true}) {
      const TrainConfig cfg = load_train_config(
          "", {"--model_name_or_path=" + base, "--use_peft=true", "--lora_target_modules=all-linear", "--lora_r=4",
               "--zero_stage=" + std::to_string(stage), std::string("--bf16=") + (bf16 ? "true" : "false")});
      release_kernel_scratch();
      reset_device_peak();
      const std::int64_t before = device_live_bytes();
      Trainer tr(cfg, 10, self());
      const MemoryReport state = tr.engine().memory();
      const double transient =
          static_cast<double>(device_peak_bytes() - before - state.weights - state.grads - state.optimizer);
      const ParamLayout& layout = tr.model().layout();
      double largest_block = 0, whole_base = 0;  // frozen values, fp32 bytes
      for (const ParamBlock& b : layout.blocks()) {
        double frozen = 0;
        for (int p : b.params) frozen += layout.params()[p].frozen ? 4.0 * layout.params()[p].numel() : 0;
        largest_block = std::max(largest_block, frozen);
        whole_base += frozen;
      }
      SCOPED_TRACE("stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32"));
      ASSERT_LT(2 * largest_block, whole_base);  // the model has blocks enough to tell the two apart
      EXPECT_LE(transient, 1.25 * largest_block) << describe_device_peak(40);
    }
  }
}

TEST(MemoryPreflight, StepPeakIsWithinTheEstimate) {
  // The whole estimate bounds what a training step really holds at its peak (Kokkos allocations), and
  // is not wildly above it: a preflight that refused runs which fit would be worse than none.
  for (int stage : {0, 3}) {
    for (bool checkpointing : {false, true}) {
     for (bool bf16 : {false, true}) {
      TrainConfig cfg = small_model(stage, bf16);
      cfg.per_device_train_batch_size = 8;
      cfg.max_seq_length = 128;
      cfg.gradient_checkpointing = checkpointing;
      release_kernel_scratch();  // each case counts its kernels' scratch, as a fresh process would
      reset_device_peak();
      const std::int64_t before = device_live_bytes();
      Trainer tr(cfg, 10, self());
      for (int s = 0; s < 2; ++s) tr.step({upper_case_batch()});
      const double peak = static_cast<double>(device_peak_bytes() - before);
      const double estimate = tr.memory_estimate().total();
      SCOPED_TRACE("stage " + std::to_string(stage) + (checkpointing ? " checkpointing" : "") + (bf16 ? " bf16" : ""));
      EXPECT_GT(peak, 0) << "the allocation hooks are not installed";
      const std::string held = "estimate " + tr.memory_estimate().describe() + "; held at the peak: " + describe_device_peak(40);
      EXPECT_LE(peak, 1.15 * estimate) << held;
      EXPECT_GE(peak, 0.7 * estimate) << held;
     }
    }
  }
}

TEST(MemoryPreflight, ALargeModelOverItsBudgetIsRefusedBeforeAllocating) {
  TrainConfig cfg;  // Qwen2-1.5B's shape
  cfg.model.vocab_size = 151936;
  cfg.model.hidden_size = 1536;
  cfg.model.num_hidden_layers = 28;
  cfg.model.num_attention_heads = 12;
  cfg.model.num_key_value_heads = 2;
  cfg.model.intermediate_size = 8960;
  cfg.max_memory_per_rank = "1GB";
  reset_device_peak();
  const std::int64_t before = device_live_bytes();
  try {
    Trainer tr(cfg, 10, self());
    FAIL() << "a 1.5B model in 1 GB was not refused";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("max_memory_per_rank"), std::string::npos) << what;
    EXPECT_NE(what.find("has 954 MiB"), std::string::npos) << what;   // 1e9 bytes
    EXPECT_NE(what.find("needs about 2"), std::string::npos) << what;  // 16 bytes x 1.54e9 params: 23 GiB
    EXPECT_NE(what.find("GiB"), std::string::npos) << what;
  }
  EXPECT_LT(device_peak_bytes() - before, 64 << 20) << "the model's state was allocated before the check";
}

TEST(MemoryPreflight, NoneSkipsTheCheckAndAutoReadsTheMachine) {
  TrainConfig cfg = small_model(0, false);
  EXPECT_EQ(rank_memory_budget(cfg.max_memory_per_rank, 1).bytes, -1);
  cfg.max_memory_per_rank = "auto";
  const RankMemoryBudget one = rank_memory_budget(cfg.max_memory_per_rank, 1), two = rank_memory_budget(cfg.max_memory_per_rank, 2);
  ASSERT_GT(one.bytes, 0) << one.source;
  if (testing_util::kComputeOnDevice) {  // a rank per GPU: its free memory is its own
    EXPECT_NEAR(two.bytes, one.bytes, 0.05 * one.bytes) << two.source;
    EXPECT_NE(two.source.find("cudaMemGetInfo"), std::string::npos) << two.source;
  } else {  // host memory: the ranks on the host share it
    EXPECT_NEAR(two.bytes, one.bytes / 2, 0.05 * one.bytes) << two.source;
    EXPECT_NE(two.source.find("shared by 2 ranks"), std::string::npos) << two.source;
  }
  cfg.max_memory_per_rank = "12GiB";
  EXPECT_EQ(rank_memory_budget(cfg.max_memory_per_rank, 4).bytes, 12.0 * 1073741824.0);
}

TEST(MemoryPreflight, SizesParseAsAccelerateReadsThem) {
  EXPECT_EQ(parse_memory_size("16GB"), 16e9);
  EXPECT_EQ(parse_memory_size("12GiB"), 12.0 * 1073741824.0);
  EXPECT_EQ(parse_memory_size("512 MB"), 512e6);
  EXPECT_EQ(parse_memory_size("1.5e9"), 1.5e9);
  EXPECT_EQ(parse_memory_size("300KiB"), 300.0 * 1024);
  for (const char* bad : {"", "GB", "-1GB", "0", "12 gigs", "nan", "1e400"}) {
    EXPECT_THROW(parse_memory_size(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(canonical_memory_size_text("auto"), "auto");
  EXPECT_EQ(canonical_memory_size_text("none"), "none");
  EXPECT_THROW(canonical_memory_size_text("lots"), std::invalid_argument);
}

// A directory laid out as / with the files the capacity is read from.
class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("shardft-memroot-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void write(const std::string& path, const std::string& text) {
    const auto p = root_ / path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return root_.string(); }
  std::filesystem::path root_;
};

const char* kMeminfo = "MemTotal:       32000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n";

TEST_F(FakeRoot, MemAvailableWithoutACgroupLimit) {
  write("proc/meminfo", kMeminfo);
  write("proc/self/cgroup", "0::/job\n");
  write("sys/fs/cgroup/job/memory.max", "max\n");
  write("sys/fs/cgroup/job/memory.current", "123456\n");
  const MemoryCapacity c = host_memory_capacity(root());
  EXPECT_EQ(c.bytes, 20000000.0 * 1024);
  EXPECT_NE(c.source.find("MemAvailable"), std::string::npos) << c.source;
}

TEST_F(FakeRoot, TheTightestCgroupV2LevelBinds) {
  write("proc/meminfo", kMeminfo);
  write("proc/self/cgroup", "0::/slurm/job7/step0\n");
  write("sys/fs/cgroup/slurm/memory.max", "8000000000\n");
  write("sys/fs/cgroup/slurm/memory.current", "1000000000\n");
  write("sys/fs/cgroup/slurm/job7/memory.max", "1073741824\n");  // the job's 1 GiB
  write("sys/fs/cgroup/slurm/job7/memory.current", "73741824\n");
  write("sys/fs/cgroup/slurm/job7/step0/memory.max", "max\n");
  const MemoryCapacity c = host_memory_capacity(root());
  EXPECT_EQ(c.bytes, 1000000000.0);
  EXPECT_NE(c.source.find("job7"), std::string::npos) << c.source;
}

TEST_F(FakeRoot, CgroupV1MemoryController) {
  write("proc/meminfo", kMeminfo);
  write("proc/self/cgroup", "12:cpu,cpuacct:/x\n7:memory:/docker/abc\n");
  write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
  write("sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "147483648\n");
  write("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  const MemoryCapacity c = host_memory_capacity(root());
  EXPECT_EQ(c.bytes, 2000000000.0);
}

TEST_F(FakeRoot, NothingReadableIsUnknown) {
  EXPECT_LT(host_memory_capacity(root()).bytes, 0);
}

}  // namespace
}  // namespace shardft
