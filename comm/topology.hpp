#pragma once
// Where each rank runs: node identity from MPI (ranks that share memory share a node), or from a
// `ranks_per_node` override so that 4 ranks on one machine can behave as 2 nodes of 2. The groups
// built on it are the parallel plan's (src/parallel/parallel_plan.hpp); comm/ knows no ZeRO groups.
#include <mpi.h>

namespace shardft {

struct Topology {
  int world_rank = 0, world_size = 1;
  int node = 0, num_nodes = 1;          // this rank's node index, nodes in the job
  int local_rank = 0, ranks_per_node = 1;
  int ranks_sharing_memory = 1;         // ranks on this rank's machine as MPI finds them, override or not

  // ranks_per_node_override > 0 replaces what MPI finds. Throws std::invalid_argument when the
  // ranks are not spread evenly over the nodes (hybrid sharding needs equal node sizes).
  static Topology discover(MPI_Comm world, int ranks_per_node_override = 0);
};

}  // namespace shardft
