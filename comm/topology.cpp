#include "comm/topology.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardft {

Topology Topology::discover(MPI_Comm world, int ranks_per_node_override) {
  Topology t;
  MPI_Comm_rank(world, &t.world_rank);
  MPI_Comm_size(world, &t.world_size);
  MPI_Comm local;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, t.world_rank, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &t.ranks_sharing_memory);
  if (ranks_per_node_override > 0) {
    MPI_Comm_free(&local);
    if (t.world_size % ranks_per_node_override != 0) {
      throw std::invalid_argument("ranks_per_node " + std::to_string(ranks_per_node_override) + " does not divide the " +
                                  std::to_string(t.world_size) + " ranks of the job");
    }
    t.ranks_per_node = ranks_per_node_override;
    t.node = t.world_rank / ranks_per_node_override;
    t.local_rank = t.world_rank % ranks_per_node_override;
    t.num_nodes = t.world_size / ranks_per_node_override;
    return t;
  }
  MPI_Comm_rank(local, &t.local_rank);
  MPI_Comm_size(local, &t.ranks_per_node);
  // A node is named by its lowest world rank; nodes are numbered in that order.
  int leader = t.world_rank;
  MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, local);
  MPI_Comm_free(&local);
  std::vector<int> leaders(t.world_size);
  MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world);
  std::vector<int> distinct = leaders;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  t.num_nodes = static_cast<int>(distinct.size());
  t.node = static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), leader) - distinct.begin());
  int min_size = t.ranks_per_node, max_size = t.ranks_per_node;
  MPI_Allreduce(MPI_IN_PLACE, &min_size, 1, MPI_INT, MPI_MIN, world);
  MPI_Allreduce(MPI_IN_PLACE, &max_size, 1, MPI_INT, MPI_MAX, world);
  if (min_size != max_size) {
    throw std::invalid_argument("nodes run different numbers of ranks (" + std::to_string(min_size) + " to " +
                                std::to_string(max_size) + "); launch the same number per node");
  }
  return t;
}

}  // namespace shardft
