// QLoRA from a bitsandbytes 4-bit checkpoint (tests/reference/hf/tiny_llama_bnb4) sharded over the
// world's ranks at ZeRO-3: each rank reads the stored NF4 bytes and keeps its shard, and the run equals
// QLoRA over the same ranks from the full-precision tiny_llama (quantized at load) bit for bit: the same
// losses, gradients and adapters, and the same NF4 bytes held per rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>

#include "comm/mpi_communicator.hpp"
#include "tests/common/peft_fixture_run.hpp"

namespace shardft {
namespace {
using namespace testing_util;

TEST(Bnb4CheckpointZero, Stage3EqualsQuantizingAtLoad) {
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  const std::string name = "llama_all_linear";  // PEFT fixture on hf/tiny_llama
  const TokenBatch mine = peft_fixture_batch(name, world.rank(), world.size());
  std::vector<std::string> flags = {"--zero_stage=3", "--load_in_4bit=true"};
  Trainer plain(peft_fixture_config(name, flags), 3, world);
  flags.push_back("--model_name_or_path=" + std::string(SHARDFT_REFERENCE_DIR) + "/hf/tiny_llama_bnb4");
  Trainer bnb(peft_fixture_config(name, flags), 3, world);
  const PeftFixtureRun p = run_peft_fixture(plain, mine, 3);
  const PeftFixtureRun b = run_peft_fixture(bnb, mine, 3);
  ASSERT_EQ(p.weights_before.size(), b.weights_before.size());
  EXPECT_EQ(std::memcmp(p.weights_before.data(), b.weights_before.data(), 4 * p.weights_before.size()), 0);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(b.losses[s], p.losses[s]) << "step " << s + 1;
  EXPECT_EQ(std::memcmp(p.grads_step1.data(), b.grads_step1.data(), 4 * p.grads_step1.size()), 0);
  EXPECT_EQ(std::memcmp(p.weights_after.data(), b.weights_after.data(), 4 * p.weights_after.size()), 0);
  EXPECT_NE(p.weights_before, p.weights_after);
  EXPECT_EQ(b.memory.nf4_weights, p.memory.nf4_weights);  // this rank's shard of the bytes
  EXPECT_GT(b.memory.nf4_weights, 0);
}

}  // namespace
}  // namespace shardft
