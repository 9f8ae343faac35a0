#pragma once
// Where each rank runs: node identity from MPI (ranks that share memory share a node), or from a
// `ranks_per_node` override so that 4 ranks on one machine can behave as 2 nodes of 2.
#include <mpi.h>

#include <memory>

#include "comm/mpi_communicator.hpp"

namespace shardft {

struct Topology {
  int world_rank = 0, world_size = 1;
  int node = 0, num_nodes = 1;          // this rank's node index, nodes in the job
  int local_rank = 0, ranks_per_node = 1;

  // ranks_per_node_override > 0 replaces what MPI finds. Throws std::invalid_argument when the
  // ranks are not spread evenly over the nodes (hybrid sharding needs equal node sizes).
  static Topology discover(MPI_Comm world, int ranks_per_node_override = 0);
};

// The groups a job communicates in: the world, the ranks of this node, and for hybrid sharding the
// shard group (ranks that split one model copy) and the replica group (same shard index across
// shard groups).
struct ProcessGroups {
  // cross_node: the ranks with this rank's local index on every node (the second hop of qgZ).
  std::unique_ptr<MpiCommunicator> world, node, shard, replica, cross_node;
  // ZeRO++, inside the shard group: hpZ's secondary group (secondary_size consecutive ranks), and
  // qgZ's hops (the shard group's ranks on this node; its ranks with this local index elsewhere).
  std::unique_ptr<MpiCommunicator> secondary, shard_intra_node, shard_cross_node;

  // shard_size 0 = the whole world is one shard group (plain ZeRO); otherwise world_size must be a
  // multiple of it and groups are consecutive ranks. secondary_size (hpZ) must divide shard_size.
  static ProcessGroups create(MPI_Comm world, const Topology& topo, int shard_size, int secondary_size = 1);
};

}  // namespace shardft
