#include "train/startup_report.hpp"

#include <Kokkos_Core.hpp>
#include <sstream>

#include "config/recipe_schema.hpp"
#include "comm/communicator_factory.hpp"
#include "kernels/attention_fused.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/gemm.hpp"

namespace shardft {

std::string build_description(bool with_idle) {
  std::ostringstream s;
  s << "Kokkos " << KOKKOS_VERSION / 10000 << "." << KOKKOS_VERSION / 100 % 100 << "." << KOKKOS_VERSION % 100 << " ("
    << Kokkos::DefaultExecutionSpace::name() << "), GEMM " << gemm_backend_description(with_idle)
    << ", collectives MPI";
  if (this_build().nccl_compiled) s << " (NCCL backend compiled in)";
  if (fused_attention_compiled()) s << ", cuDNN attention compiled in";
  return s.str();
}

std::string startup_report(const TrainConfig& cfg, const JobShape& job) {
  std::ostringstream s;
  s << "build: " << build_description(cfg.log_level == "debug") << "\n";
  s << "blas: " << describe_blas_core() << "\n";
  s << "topology: " << job.world_size << " ranks = " << job.num_nodes << " node" << (job.num_nodes == 1 ? "" : "s")
    << " x " << job.ranks_per_node << " ranks per node ("
    << (job.ranks_per_node_overridden ? "ranks_per_node override" : "from MPI") << "); shard groups of "
    << job.shard_group_size << ", " << job.world_size / job.shard_group_size << " replica"
    << (job.world_size / job.shard_group_size == 1 ? "" : "s") << "\n"
    << job.groups;
  const TrainConfig defaults;
  std::string changed;
  for (const RecipeKey& key : recipe_keys()) {
    const std::string value = value_text(cfg, key);
    std::string where;
    for (const auto& src : cfg.sources) {
      if (src.first == key.name) where = src.second;
    }
    // A key the recipe left to `auto` shows what auto decided, default or not.
    if (value == value_text(defaults, key) && where.find("auto: ") == std::string::npos) continue;
    changed += "  " + key.name + ": " + value + (where.empty() ? "" : "   # " + where) + "\n";
  }
  s << "resolved config (keys off their defaults; `shardft keys` lists all):\n" << changed;
  return s.str();
}

}  // namespace shardft
