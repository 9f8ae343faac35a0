#pragma once
// What rank 0 prints before training: the build (Kokkos backend, GEMM library, collectives), the
// topology MPI found, and every recipe key that is not at its default, with where it was set.
#include <string>

#include "config/train_config.hpp"

namespace shardft {

struct JobShape {
  int world_size = 1, num_nodes = 1, ranks_per_node = 1;
  bool ranks_per_node_overridden = false;
  int shard_group_size = 1;
  std::string groups;  // the parallel plan's report: each group's size, count and backend (ParallelPlan::report)
};

// "Kokkos 4.6.1 (Cuda), GEMM cuBLAS (device views), collectives MPI (NCCL backend compiled in), ...".
// with_idle: also what is linked but cannot run here (cuBLAS without a CUDA Kokkos): `--version` and
// log_level debug say it, the default log does not.
std::string build_description(bool with_idle = true);
std::string startup_report(const TrainConfig& cfg, const JobShape& job);

}  // namespace shardft
