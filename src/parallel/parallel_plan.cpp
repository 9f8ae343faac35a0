#include "parallel/parallel_plan.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "comm/communicator_factory.hpp"
#include "config/train_config.hpp"  // is_hybrid_strategy

namespace shardft {

namespace {

std::string list(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return s;
}

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int k = 1; k <= n; ++k) {
    if (n % k == 0) d.push_back(k);
  }
  return d;
}

std::string plural(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

}  // namespace

ParallelDims ParallelDims::resolve(const ParallelConfig& cfg, int world, int nodes, int ranks_per_node) {
  ParallelDims d;
  d.world = world;
  d.ranks_per_node = ranks_per_node;
  d.nodes = nodes;
  std::vector<std::string> problems;
  if (ranks_per_node < 1 || world % ranks_per_node != 0 || nodes * ranks_per_node != world) {
    problems.push_back("ranks_per_node " + std::to_string(ranks_per_node) + " does not divide the " +
                       std::to_string(world) + " ranks of the job; would fit: " + list(divisors(world)));
  }
  const bool rpn_ok = problems.empty();

  // The shard group: the recipe's size, a node for HYBRID_SHARD, else every rank.
  std::string shard_from = "all ranks";
  d.shard = world;
  if (cfg.shard_group_size > 0) {
    d.shard = cfg.shard_group_size;
    shard_from = "shard_group_size";
  } else if (is_hybrid_strategy(cfg.sharding_strategy)) {
    d.shard = ranks_per_node;
    shard_from = "sharding_strategy " + cfg.sharding_strategy + ": a node";
  }
  const bool shard_ok = d.shard >= 1 && world % d.shard == 0;
  if (!shard_ok) {
    problems.push_back("shard_group_size " + std::to_string(d.shard) + " does not divide the " + std::to_string(world) +
                       " ranks of the job; would fit: " + list(divisors(world)));
  }
  d.replicas = shard_ok ? world / d.shard : 0;

  d.hpz = cfg.zero_hpz_partition_size;
  if (d.hpz < 1 || (d.shard >= 1 && d.shard % d.hpz != 0)) {
    problems.push_back("zero_hpz_partition_size " + std::to_string(d.hpz) + " does not divide the shard group of " +
                       std::to_string(d.shard) + " ranks; would fit: " + list(divisors(std::max(1, d.shard))));
  }

  d.qgz = cfg.zero_quantized_gradients;
  if (d.qgz && shard_ok && rpn_ok) {
    // The two hops tile the shard group only when it is part of one node or made of whole nodes.
    if (d.shard % ranks_per_node != 0 && ranks_per_node % d.shard != 0) {
      std::vector<int> fit;
      for (int f : divisors(world)) {
        if (f % ranks_per_node == 0 || ranks_per_node % f == 0) fit.push_back(f);
      }
      problems.push_back("zero_quantized_gradients needs each shard group to lie within one node or to be whole "
                         "nodes, but shard groups of " + std::to_string(d.shard) + " ranks straddle nodes of " +
                         std::to_string(ranks_per_node) + "; shard_group_size that would fit: " + list(fit));
    } else {
      d.qgz_intra = std::min(d.shard, ranks_per_node);
      d.qgz_cross = d.shard / d.qgz_intra;
    }
  }
  if (!problems.empty()) {
    std::ostringstream s;
    s << "the parallel layout does not fit: world size " << world << " = " << plural(nodes, "node", "nodes") << " x "
      << ranks_per_node << " ranks per node" << (cfg.ranks_per_node > 0 ? " (ranks_per_node)" : " (from MPI)")
      << "; shard group " << d.shard << " (" << shard_from << "), replicas "
      << (shard_ok ? std::to_string(d.replicas) : std::to_string(world) + "/" + std::to_string(d.shard) + " (not whole)")
      << "; hpZ partition " << d.hpz << " (zero_hpz_partition_size)"
      << "; qgZ " << (d.qgz ? "on" : "off") << " (zero_quantized_gradients)";
    for (const std::string& p : problems) s << "\n  - " << p;
    throw ConfigError(s.str());
  }
  return d;
}

std::string ParallelDims::describe() const {
  std::ostringstream s;
  s << world << " rank" << (world == 1 ? "" : "s") << " = " << plural(nodes, "node", "nodes") << " x " << ranks_per_node
    << "; shard groups of " << shard << ", " << plural(replicas, "replica", "replicas");
  if (hpz > 1) s << "; hpZ groups of " << hpz;
  if (qgz) s << "; qgZ hops of " << qgz_intra << " (intra-node) x " << qgz_cross << " (inter-node)";
  return s.str();
}

ParallelPlan ParallelPlan::over(Communicator& group) {
  ParallelPlan p;
  p.dims_.world = p.dims_.shard = p.dims_.ranks_per_node = group.size();
  p.topo_.world_size = p.topo_.ranks_per_node = group.size();
  p.topo_.world_rank = p.topo_.local_rank = group.rank();
  p.world_ = p.host_world_ = p.shard_ = &group;
  return p;
}

ParallelPlan ParallelPlan::create(MPI_Comm world, const ParallelConfig& cfg) {
  ParallelPlan p;
  int world_size = 1;
  MPI_Comm_size(world, &world_size);
  if (cfg.ranks_per_node > 0 && world_size % cfg.ranks_per_node != 0) {
    // Reported with every other factor of the layout.
    ParallelDims::resolve(cfg, world_size, world_size / cfg.ranks_per_node, cfg.ranks_per_node);
  }
  try {
    p.topo_ = Topology::discover(world, cfg.ranks_per_node);
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("ranks_per_node: ") + e.what());
  }
  const Topology& topo = p.topo_;
  p.dims_ = ParallelDims::resolve(cfg, topo.world_size, topo.num_nodes, topo.ranks_per_node);
  const ParallelDims& d = p.dims_;
  CollectivesBackend backend;
  try {
    backend = choose_collectives(cfg.collectives, this_build());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(e.what());
  }
  auto mpi_world = std::make_shared<MpiCommunicator>(world, "world");
  mpi_world->set_collective_timeout(cfg.collective_timeout_s);
  const int r = topo.world_rank;
  // Every rank calls every split (MPI_Comm_split is collective), also for groups it will not use.
  Communicator* last_mpi_group = nullptr;
  auto split = [&](int color, const char* name) -> Communicator* {
    std::shared_ptr<MpiCommunicator> group = mpi_world->split(color, r, name);
    last_mpi_group = group.get();
    int lo = topo.node, hi = topo.node;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, group->comm());
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, group->comm());
    std::shared_ptr<Communicator> c = make_communicator(group, backend);
    c->ledger().set_crosses_nodes(lo != hi);
    p.owned_.push_back(group);
    if (c != group) p.owned_.push_back(c);
    return c.get();
  };
  p.world_ = split(0, "world");
  p.host_world_ = last_mpi_group;
  p.shard_ = split(r / d.shard, "shard");
  Communicator* replica = split(r % d.shard, "replica");
  if (d.replicas > 1) p.replica_ = replica;
  if (d.hpz > 1) p.hpz_ = split(r / d.hpz, "hpz");
  if (d.qgz) {
    const int shard_index = r / d.shard;
    p.qgz_intra_ = split(shard_index * topo.num_nodes + topo.node, "qgz_intra_node");
    p.qgz_cross_ = split(shard_index * topo.ranks_per_node + topo.local_rank, "qgz_cross_node");
  }
  return p;
}

std::vector<Communicator*> ParallelPlan::communicators() const {
  std::vector<Communicator*> all;
  for (Communicator* c : {world_, host_world_, shard_, replica_, hpz_, qgz_intra_, qgz_cross_}) {
    if (c && std::find(all.begin(), all.end(), c) == all.end()) all.push_back(c);
  }
  return all;
}

std::string ParallelPlan::report() const {
  std::ostringstream s;
  s << "parallel plan: " << dims_.describe() << "\n";
  auto line = [&](const char* role, Communicator* c, int count) {
    if (!c) return;
    s << "  " << role << ": " << plural(count, "group", "groups") << " of " << c->size() << " (" << c->backend()
      << (c->ledger().crosses_nodes() ? ", crosses nodes" : ", within a node") << ")\n";
  };
  const int w = dims_.world;
  line("world  ", world_, 1);
  line("shard  ", shard_, w / std::max(1, dims_.shard));
  line("replica", replica_, dims_.shard);
  line("hpZ    ", hpz_, w / std::max(1, dims_.hpz));
  line("qgZ intra-node", qgz_intra_, w / std::max(1, dims_.qgz_intra));
  line("qgZ inter-node", qgz_cross_, w / std::max(1, dims_.qgz_cross));
  return s.str();
}

}  // namespace shardft
