#pragma once
// The parallel plan's section of the recipe (parallel/parallel_plan.hpp reads it; built by
// config/recipe_sections.hpp).
#include <string>

namespace shardft {

// What the plan reads of the recipe, under the recipe keys' names and meanings.
struct ParallelConfig {
  int shard_group_size = 0;
  std::string sharding_strategy;
  int zero_hpz_partition_size = 1;
  bool zero_quantized_gradients = false;
  int ranks_per_node = 0;             // > 0: overrides MPI's topology
  std::string collectives = "auto";
  double collective_timeout_s = 1800;
};

}  // namespace shardft
