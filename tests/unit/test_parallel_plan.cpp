// The parallel plan's arithmetic (every factor of the layout, validated at once) and the choice of the
// collectives' backend, for every build: the facts of a build are arguments here.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA

#include <string>

#include "comm/communicator_factory.hpp"
#include "parallel/parallel_plan.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

std::string layout_error(const TrainConfig& cfg, int world, int nodes, int ranks_per_node) {
  try {
    ParallelDims::resolve(parallel_config(cfg), world, nodes, ranks_per_node);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in:\n" << text;
}

TEST(ParallelDims, FullShardHybridAndZeroPlusPlusLayouts) {
  TrainConfig cfg;
  ParallelDims d = ParallelDims::resolve(parallel_config(cfg), 8, 2, 4);
  EXPECT_EQ(d.shard, 8);
  EXPECT_EQ(d.replicas, 1);
  EXPECT_FALSE(d.qgz);

  cfg.sharding_strategy = "HYBRID_SHARD";  // a node per shard group
  cfg.zero_hpz_partition_size = 2;
  cfg.zero_quantized_gradients = true;
  d = ParallelDims::resolve(parallel_config(cfg), 8, 2, 4);
  EXPECT_EQ(d.shard, 4);
  EXPECT_EQ(d.replicas, 2);
  EXPECT_EQ(d.hpz, 2);
  EXPECT_EQ(d.qgz_intra, 4);  // the shard group lies within a node: qgZ's second hop is one rank
  EXPECT_EQ(d.qgz_cross, 1);
  EXPECT_EQ(d.describe(), "8 ranks = 2 nodes x 4; shard groups of 4, 2 replicas; hpZ groups of 2; qgZ hops of 4 "
                          "(intra-node) x 1 (inter-node)");

  cfg.sharding_strategy = "";
  cfg.shard_group_size = 0;  // the whole world, two nodes: qgZ crosses them
  d = ParallelDims::resolve(parallel_config(cfg), 8, 2, 4);
  EXPECT_EQ(d.qgz_intra, 4);
  EXPECT_EQ(d.qgz_cross, 2);
  cfg.shard_group_size = 2;  // explicit, wins over the strategy
  cfg.sharding_strategy = "HYBRID_SHARD";
  d = ParallelDims::resolve(parallel_config(cfg), 8, 2, 4);
  EXPECT_EQ(d.shard, 2);
  EXPECT_EQ(d.replicas, 4);
}

// One error names every factor, every problem and what would fit, not just the first problem found.
TEST(ParallelDims, OneErrorListsEveryFactorAndWhatWouldFit) {
  TrainConfig cfg;
  cfg.shard_group_size = 4;
  cfg.zero_hpz_partition_size = 3;
  const std::string e = layout_error(cfg, 6, 3, 2);
  expect_has(e, "world size 6 = 3 nodes x 2 ranks per node (from MPI)");
  expect_has(e, "shard group 4 (shard_group_size), replicas 6/4 (not whole)");
  expect_has(e, "hpZ partition 3 (zero_hpz_partition_size)");
  expect_has(e, "\n  - shard_group_size 4 does not divide the 6 ranks of the job; would fit: 1, 2, 3, 6");
  expect_has(e, "\n  - zero_hpz_partition_size 3 does not divide the shard group of 4 ranks; would fit: 1, 2, 4");
}

TEST(ParallelDims, QgzNeedsShardGroupsThatTileNodes) {
  TrainConfig cfg;
  cfg.zero_quantized_gradients = true;
  cfg.shard_group_size = 3;
  cfg.ranks_per_node = 2;  // an override: the message says so
  const std::string e = layout_error(cfg, 6, 3, 2);
  expect_has(e, "(ranks_per_node)");
  expect_has(e, "qgZ on");
  expect_has(e, "shard groups of 3 ranks straddle nodes of 2; shard_group_size that would fit: 1, 2, 6");
  cfg.shard_group_size = 6;
  EXPECT_EQ(layout_error(cfg, 6, 3, 2), "");
}

TEST(ParallelDims, RanksPerNodeThatDoesNotDivideTheJob) {
  TrainConfig cfg;
  cfg.ranks_per_node = 3;
  const std::string e = layout_error(cfg, 4, 1, 3);
  expect_has(e, "ranks_per_node 3 does not divide the 4 ranks of the job; would fit: 1, 2, 4");
}

TEST(ParallelPlan, OverOneGroupIsTheWorldAndTheShardGroup) {
  struct One : Communicator {
    int rank() const override { return 0; }
    int size() const override { return 1; }
    const std::string& name() const override { return n; }
    const char* backend() const override { return "self"; }
    RequestPtr iall_reduce(const void*, void*, std::size_t, DType, ReduceOp) override { return completed_request(); }
    RequestPtr ireduce_scatter(const void*, void*, std::size_t, DType, ReduceOp) override { return completed_request(); }
    RequestPtr iall_gather(const void*, void*, std::size_t, DType) override { return completed_request(); }
    RequestPtr ibroadcast(void*, std::size_t, DType, int) override { return completed_request(); }
    RequestPtr iall_to_all(const void*, void*, std::size_t, DType) override { return completed_request(); }
    void barrier() override {}
    ByteLedger& ledger() override { return l; }
    std::string n = "one";
    ByteLedger l;
  } one;
  const ParallelPlan p = ParallelPlan::over(one);
  EXPECT_EQ(&p.world(), &one);
  EXPECT_EQ(&p.shard(), &one);
  EXPECT_EQ(p.replica(), nullptr);
  EXPECT_EQ(p.hpz(), nullptr);
  EXPECT_EQ(p.qgz_intra(), nullptr);
  ASSERT_EQ(p.communicators().size(), 1u);
  expect_has(p.report(), "world  : 1 group of 1 (self");
}

// auto: NCCL where the compute memory is device memory, MPI where it is host memory; an explicit
// request that the build cannot carry out is refused with the reason and what to ask for instead.
TEST(Collectives, TheFactoryPicksNcclForDeviceMemoryAndMpiForHostMemory) {
  const CommBuild cpu{true, false, "HostSpace"}, cpu_with_nccl{true, true, "HostSpace"}, gpu{false, true, "Cuda"},
      gpu_without_nccl{false, false, "Cuda"};
  EXPECT_EQ(choose_collectives("auto", cpu), CollectivesBackend::mpi);
  EXPECT_EQ(choose_collectives("auto", cpu_with_nccl), CollectivesBackend::mpi);
  EXPECT_EQ(choose_collectives("auto", gpu), CollectivesBackend::nccl);
  EXPECT_EQ(choose_collectives("nccl", gpu), CollectivesBackend::nccl);
  EXPECT_EQ(choose_collectives("mpi", cpu), CollectivesBackend::mpi);
  auto refusal = [](const std::string& requested, const CommBuild& b) -> std::string {
    try {
      choose_collectives(requested, b);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  expect_has(refusal("nccl", cpu), "collectives: nccl, but this build has no NCCL backend");
  expect_has(refusal("nccl", cpu_with_nccl), "collectives: nccl needs device compute memory, but the compute memory "
                                             "space (Kokkos HostSpace) is host memory");
  expect_has(refusal("mpi", gpu), "collectives: mpi needs host-accessible compute memory, but the compute memory space "
                                  "(Kokkos Cuda) is device memory");
  expect_has(refusal("auto", gpu_without_nccl), "this build has no NCCL backend");
  expect_has(refusal("gloo", cpu), "collectives: 'gloo' is not one of auto, mpi, nccl");
}

// This build's own facts: a CPU Kokkos computes in host memory, and then auto means MPI.
TEST(Collectives, ThisBuildChoosesWhatItsMemorySpaceNeeds) {
  const CommBuild b = this_build();
#if defined(KOKKOS_ENABLE_CUDA)
  EXPECT_FALSE(b.compute_memory_on_host);
#else
  EXPECT_TRUE(b.compute_memory_on_host);
  EXPECT_EQ(choose_collectives("auto", b), CollectivesBackend::mpi);
#endif
#if defined(SHARDFT_HAVE_NCCL)
  EXPECT_TRUE(b.nccl_compiled);
#else
  EXPECT_FALSE(b.nccl_compiled);
  EXPECT_THROW(choose_collectives("nccl", b), std::invalid_argument);
#endif
}

}  // namespace
}  // namespace shardft
