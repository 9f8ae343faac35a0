#pragma once
// What one rank trains on at each optimizer step: its gradient_accumulation_steps micro-batches,
// picked by the sampler (data/sampler.hpp) from the epoch's order and collated, one sample per row or,
// with packing, the packed rows (trl's `packing`: batch sizes then count rows).
#include <cstdint>
#include <vector>

#include "data/sampler.hpp"
#include "data/sft_data.hpp"

namespace shardft {

class BatchSource {
 public:
  // samples and rows (the packed rows' sample indices; unused without packing) must outlive the source.
  BatchSource(const SamplerConfig& cfg, const std::vector<TokenizedSample>& samples,
              const std::vector<std::vector<std::int64_t>>& rows, const StepPlan& plan, int rank, int dp_ranks,
              std::int32_t pad_id);

  // The micro-batches of optimizer step `step` (0-based) on this rank.
  std::vector<TokenBatch> step_batches(long step);

  // How many units an epoch orders: rows with packing, samples without.
  static long num_units(const SamplerConfig& cfg, const std::vector<TokenizedSample>& samples,
                        const std::vector<std::vector<std::int64_t>>& rows);

 private:
  SamplerConfig cfg_;
  const std::vector<TokenizedSample>& samples_;
  const std::vector<std::vector<std::int64_t>>& rows_;
  StepPlan plan_;
  int rank_, dp_ranks_;
  std::int32_t pad_id_;
  std::vector<std::int64_t> order_;  // the current epoch's permutation of the units
  long order_epoch_ = -1;
};

}  // namespace shardft
