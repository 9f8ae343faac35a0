#pragma once
// The memory preflight: before the model's state is allocated, estimate what one rank of this run
// will hold and refuse, on every rank at once, a run that cannot fit, naming both numbers. A 1.5B model
// started in a 1 GiB container otherwise allocates until the kernel kills it, with no word of why.
//
// The persistent part is exact: the same formulas the ZeroEngine allocates by (a test holds them
// equal). Activations and transient gathers are an estimate of the largest working set of one step.
#include <string>

#include "comm/communicator.hpp"
#include "config/config_error.hpp"
#include "config/engine_sections.hpp"
#include "model/param_layout.hpp"
#include "parallel/zero/zero_config.hpp"

namespace shardft {

struct RankMemoryEstimate {
  double weights = 0, grads = 0, optimizer = 0;  // persistent, bytes (MemoryReport's kinds)
  double frozen_weights = 0;  // the part of `weights` that holds frozen parameters (LoRA's base)
  double gathered = 0;     // stage 3: the block computing and the block prefetched, gathered; and a unit's gradients
  double nf4_transient = 0;  // the part of `gathered` that is QLoRA's (MemoryReport::peak_nf4_transient)
  double activations = 0;  // one micro-batch: what forward keeps for backward, and one layer's working set
  double persistent() const { return weights + grads + optimizer; }
  double total() const { return persistent() + gathered + activations; }
  // "weights 1.23 GiB + gradients ... + activations ... = 4.56 GiB"
  std::string describe() const;
};

// One rank of a shard group of `shard_size` ranks.
RankMemoryEstimate estimate_rank_memory(const ModelConfig& model, const ParamLayout& layout, const ZeroConfig& zero,
                                        int shard_size, const ActivationShape& shape);

// What the rank may use: max_memory_per_rank when it is a size, else the compute space's capacity
// (kernels/memory_capacity.hpp), the host's split among `ranks_sharing_host` ranks. bytes < 0: unknown.
struct RankMemoryBudget {
  double bytes = -1;
  std::string source;
};
RankMemoryBudget rank_memory_budget(const std::string& max_memory_per_rank, int ranks_sharing_host);

// Collective over `world` (every rank calls it): throws ConfigError on every rank when any rank's
// estimate exceeds its budget, naming that rank, both numbers, their parts, and what would help. Does
// nothing with max_memory_per_rank: none, or where the budget is unknown.
void check_rank_memory(const RankMemoryEstimate& need, const RankMemoryBudget& budget, Communicator& world);

}  // namespace shardft
