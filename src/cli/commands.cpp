#include <iostream>

#include "cli/commands.hpp"
#include "comm/mpi_communicator.hpp"
#include "config/deepspeed_json.hpp"
#include "config/logits_chunk.hpp"
#include "config/recipe_schema.hpp"
#include "config/train_config.hpp"
#include "kernels/compute_device.hpp"
#include "parallel/parallel_plan.hpp"
#include "config/recipe_sections.hpp"
#include "train/startup_report.hpp"
#include "train/run.hpp"

namespace shardft::cli {

Invocation parse_invocation(const std::vector<std::string>& args) {
  Invocation inv;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--config" || a == "--deepspeed") {
      if (i + 1 >= args.size()) throw ConfigError(a + ": expected a path after it");
      (a == "--config" ? inv.config_path : inv.deepspeed_path) = args[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      inv.config_path = a.substr(9);
    } else if (a.rfind("--deepspeed=", 0) == 0) {
      inv.deepspeed_path = a.substr(12);
    } else {
      inv.overrides.push_back(a);
    }
  }
  return inv;
}

TrainConfig load_recipe(const Invocation& inv) {
  TrainConfig cfg = load_train_config(inv.config_path, inv.overrides, inv.deepspeed_path);
  const ComputeDevice device = compute_device();
  resolve_bf16_auto(cfg, bf16_runs_faster(device), describe_bf16_support(device));
  const LogitsChunkChoice chunk = auto_logits_chunk_tokens(cfg, device.gpu, device.free_memory_bytes);
  resolve_logits_chunk_auto(cfg, chunk.tokens, chunk.why);
  return cfg;
}

int train(const Invocation& inv, const MpiSession& mpi) {
  const TrainConfig cfg = load_recipe(inv);
  (void)mpi;
  const ParallelPlan plan = ParallelPlan::create(MPI_COMM_WORLD, parallel_config(cfg));
  const Topology& topo = plan.topology();
  if (!inv.deepspeed_path.empty() && topo.world_rank == 0) {
    std::cout << describe_deepspeed_config(read_deepspeed_config(inv.deepspeed_path), cfg, topo.world_size)
              << std::flush;
  }
  if (topo.world_rank == 0) {
    std::cout << startup_report(cfg, JobShape{topo.world_size, topo.num_nodes, topo.ranks_per_node,
                                              cfg.ranks_per_node > 0, plan.dims().shard, plan.report()})
              << std::flush;
  }
  const RunSummary s = run_training(cfg, plan, std::cout);
  return s.steps > 0 ? 0 : 1;
}

int eval(const Invocation& inv, const MpiSession& mpi) {
  const TrainConfig cfg = load_recipe(inv);
  (void)mpi;
  MpiCommunicator world(MPI_COMM_WORLD, "world");
  run_evaluation(cfg, world, std::cout);
  return 0;
}


}  // namespace shardft::cli
