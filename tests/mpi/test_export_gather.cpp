// The end-of-run export's gather (ZeroEngine::gather_master(keep)): the rank that writes gets the same
// model, bit for bit, as a gather that every rank keeps; the others take part in the collectives and get
// nothing, so only the writer ever holds a copy of the model. Every stage, fp32 and bf16 compute weights,
// a full fine-tune and the two frozen-base stores (LoRA's replicated or sharded weights, QLoRA's NF4).
// The streamed form (for_each_master_block, what the export writes from) hands the writer each block's
// own parameters, one block at a time and in order, with the same bits; the other ranks get no call.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>

#include "comm/mpi_communicator.hpp"
#include "model/layout_window.hpp"
#include "tests/common/peft_fixture_run.hpp"

namespace shardft {
namespace {
using namespace testing_util;

TEST(ExportGather, OnlyTheWriterKeepsTheModelWholeOrBlockByBlock) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const TokenBatch mine = peft_fixture_batch("llama_all_linear", world.rank(), world.size());  // on hf/tiny_llama
  for (const std::string peft : {"full", "LoRA", "QLoRA"}) {
    for (int stage : {0, 1, 2, 3}) {
      for (bool bf16 : {false, true}) {
        SCOPED_TRACE(peft + " stage " + std::to_string(stage) + (bf16 ? " bf16" : " fp32") + ", " +
                     std::to_string(world.size()) + " ranks");
        std::vector<std::string> flags = {"--model_name_or_path=" + std::string(SHARDFT_REFERENCE_DIR) + "/hf/tiny_llama",
                                          "--zero_stage=" + std::to_string(stage),
                                          std::string("--bf16=") + (bf16 ? "true" : "false"), "--learning_rate=1e-3"};
        if (peft != "full") {
          for (const char* f : {"--use_peft=true", "--lora_target_modules=all-linear", "--lora_r=4"}) flags.push_back(f);
        }
        if (peft == "QLoRA") flags.push_back("--load_in_4bit=true");
        Trainer tr(load_train_config("", flags), 3, world);
        ASSERT_EQ(tr.model().layout().has_frozen(), peft != "full");
        tr.step({mine});  // the weights moved from what was loaded
        const std::vector<float> every = tr.engine().gather_master();
        const bool writer = world.rank() == 0;
        const std::vector<float> kept = tr.engine().gather_master(writer);
        ASSERT_EQ(every.size(), static_cast<std::size_t>(tr.model().layout().total_numel()));
        if (writer) {
          ASSERT_EQ(kept.size(), every.size());
          EXPECT_EQ(std::memcmp(kept.data(), every.data(), 4 * every.size()), 0);
        } else {
          EXPECT_TRUE(kept.empty());
        }

        const ParamLayout& layout = tr.model().layout();
        int calls = 0, next_block = 0;
        std::int64_t covered = 0, largest_window = 0;
        tr.engine().for_each_master_block(writer, [&](int block, LayoutWindow& w) {
          ++calls;
          EXPECT_EQ(block, next_block++);
          const std::vector<int> own = block_own_params(layout, block);
          ASSERT_FALSE(own.empty());
          EXPECT_EQ(w.begin, layout.offset(own.front()));
          std::int64_t block_numel = 0;
          for (int p : own) {
            const std::int64_t n = layout.params()[p].numel();
            ASSERT_EQ(std::memcmp(w.at(layout, p), every.data() + layout.offset(p), 4 * n), 0) << layout.params()[p].name;
            block_numel += n;
          }
          EXPECT_EQ(static_cast<std::int64_t>(w.values.size()), block_numel);  // the block's own, nothing more
          covered += block_numel;
          largest_window = std::max(largest_window, static_cast<std::int64_t>(w.values.size()));
        });
        if (writer) {
          EXPECT_EQ(calls, static_cast<int>(layout.blocks().size()));
          EXPECT_EQ(covered, layout.total_numel());  // every parameter once, the tied embedding too
          EXPECT_LT(largest_window, layout.total_numel());  // one block at a time, never the model
        } else {
          EXPECT_EQ(calls, 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace shardft
