#pragma once
// The parallel layout of a job, in one object (torchtitan's ParallelDims): every factor derived from
// the topology and the recipe and validated once, and every communicator the job uses, built once.
//
//   world     every rank                                   loss and token counts, preemption flag
//   shard     `shard` consecutive ranks: one model copy     ZeRO's gathers and reduce-scatters
//   replica   the ranks with the same shard index           hybrid sharding: all-reduce of gradient shards
//   hpz       `hpz` consecutive ranks of a shard group      ZeRO++ hpZ: backward weight gathers
//   qgz intra the shard group's ranks on this node          ZeRO++ qgZ: first hop of the int4 reduce-scatter
//   qgz cross the shard group's ranks with this local index ZeRO++ qgZ: second hop, across nodes
//
// Each group is an MPI sub-communicator (bootstrap, host-side control) and carries its collectives on
// the backend `collectives` resolves to (comm/communicator_factory.hpp). The engine, the trainer and
// the checkpoint code take this one object; a single process uses `over(group)`.
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/topology.hpp"
#include "config/config_error.hpp"
#include "config/parallel_section.hpp"

namespace shardft {

struct ParallelDims {
  int world = 1, nodes = 1, ranks_per_node = 1;
  int shard = 1;     // ranks that split one model copy
  int replicas = 1;  // copies of the model: world / shard
  int hpz = 1;       // hpZ secondary partition (1: off)
  bool qgz = false;  // qgZ's two hops are made
  int qgz_intra = 1, qgz_cross = 1;  // the shard group's ranks per node, and the nodes it spans

  // Derives every factor for `world` ranks on `nodes` x `ranks_per_node` from the recipe
  // (shard_group_size, sharding_strategy, zero_hpz_partition_size, zero_quantized_gradients) and
  // checks them all at once: a layout that does not fit throws one ConfigError that states every factor,
  // each problem, and the values that would fit.
  static ParallelDims resolve(const ParallelConfig& cfg, int world, int nodes, int ranks_per_node);
  // "8 ranks = 2 nodes x 4; shard groups of 4, 2 replicas; hpZ groups of 2; qgZ 4 x 1"
  std::string describe() const;
};

class ParallelPlan {
 public:
  // One group carrying everything: the world is the shard group, one model copy, no ZeRO++ groups
  // (single-process runs, tests and benchmarks). `group` must outlive the plan and its copies.
  static ParallelPlan over(Communicator& group);
  // The job's plan on MPI's world: discovers the topology (ranks_per_node overrides MPI's), validates
  // the layout (ConfigError), resolves `collectives` (ConfigError naming the key) and makes every
  // group with collective_timeout_s (collective: every rank calls it).
  static ParallelPlan create(MPI_Comm world, const ParallelConfig& cfg);

  const ParallelDims& dims() const { return dims_; }
  const Topology& topology() const { return topo_; }
  Communicator& world() const { return *world_; }
  // The world on MPI even where collectives run on NCCL: for values the host holds (token counts, the
  // stop flag), which NCCL would have to copy to the device and back.
  Communicator& host_world() const { return *host_world_; }
  Communicator& shard() const { return *shard_; }
  Communicator* replica() const { return replica_; }      // nullptr with one model copy
  Communicator* hpz() const { return hpz_; }              // nullptr unless hpZ is on
  Communicator* qgz_intra() const { return qgz_intra_; }  // nullptr unless qgZ is on
  Communicator* qgz_cross() const { return qgz_cross_; }
  // Every distinct communicator of the plan (the ledger's totals visit each once).
  std::vector<Communicator*> communicators() const;
  // One line per group: name, size, how many such groups, backend, whether it crosses nodes.
  std::string report() const;

 private:
  ParallelDims dims_;
  Topology topo_;
  Communicator* world_ = nullptr;
  Communicator* host_world_ = nullptr;
  Communicator* shard_ = nullptr;
  Communicator* replica_ = nullptr;
  Communicator* hpz_ = nullptr;
  Communicator* qgz_intra_ = nullptr;
  Communicator* qgz_cross_ = nullptr;
  std::vector<std::shared_ptr<Communicator>> owned_;  // shared by copies of the plan
};

}  // namespace shardft
