// The startup report: build, topology, and the keys off their defaults with where they were set.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA

#include "train/startup_report.hpp"

namespace shardft {
namespace {

TEST(StartupReport, NamesTheBuildTheTopologyAndEveryChangedKeyWithItsSource) {
  const TrainConfig cfg = load_train_config("", {"--learning_rate=0.01", "--zero_stage", "3", "--ranks_per_node=2"});
  const std::string r = startup_report(cfg, JobShape{4, 2, 2, true, 2, "  world  : 1 group of 4 (mpi, crosses nodes)\n"});
  EXPECT_NE(r.find("build: Kokkos "), std::string::npos) << r;
  EXPECT_NE(r.find("topology: 4 ranks = 2 nodes x 2 ranks per node (ranks_per_node override); shard groups of 2, "
                   "2 replicas"),
            std::string::npos)
      << r;
  EXPECT_NE(r.find("2 replicas\n  world  : 1 group of 4 (mpi, crosses nodes)\n"), std::string::npos) << r;
  EXPECT_NE(r.find("  learning_rate: 0.01   # --learning_rate\n"), std::string::npos) << r;
  EXPECT_NE(r.find("  zero_stage: 3   # --zero_stage\n"), std::string::npos) << r;
  // Keys at their defaults stay out of it.
  EXPECT_EQ(r.find("  seed:"), std::string::npos) << r;
  EXPECT_EQ(r.find("  adam_beta1:"), std::string::npos) << r;
}

// Where GEMMs run: BLAS unless Kokkos itself has a CUDA backend (views then live on the GPU and go
// to cuBLAS); a CUDA toolkit alone does not move them.
TEST(StartupReport, SaysWhichLibraryRunsTheGemms) {
  const std::string b = build_description();
#if defined(KOKKOS_ENABLE_CUDA) && defined(SHARDFT_HAVE_CUDA)
  EXPECT_NE(b.find("GEMM cuBLAS (device views)"), std::string::npos) << b;
#else
  EXPECT_NE(b.find("GEMM BLAS (OpenBLAS)"), std::string::npos) << b;
  EXPECT_EQ(b.find("GEMM cuBLAS"), std::string::npos) << b;
#endif
}

TEST(StartupReport, OneNodeFromMpiReadsSo) {
  const std::string r = startup_report(TrainConfig{}, JobShape{2, 1, 2, false, 2, ""});
  EXPECT_NE(r.find("topology: 2 ranks = 1 node x 2 ranks per node (from MPI); shard groups of 2, 1 replica\n"),
            std::string::npos)
      << r;
}

}  // namespace
}  // namespace shardft
