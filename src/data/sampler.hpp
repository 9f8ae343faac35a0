#pragma once
// The distributed sampler: how many optimizer steps a run takes, and which units (samples, or packed
// rows) each data-parallel rank trains on in each micro-batch. The order within an epoch is
// epoch_permutation's (data/sft_data.hpp); ranks get disjoint slices of each global batch.
#include <cstdint>
#include <string>
#include <vector>

#include "config/config_error.hpp"
#include "config/data_sections.hpp"

namespace shardft {

// How many optimizer steps a run takes over n training samples (HF semantics: an epoch is the
// whole global batches that fit; max_steps > 0 wins over num_train_epochs).
// Global batch = per_device_train_batch_size x gradient_accumulation_steps x data-parallel ranks.
struct StepPlan {
  long samples_per_step = 0, steps_per_epoch = 0, total_steps = 0;
};
// ConfigError when train_batch_size disagrees with the global batch, or one step needs more samples
// than the data has.
StepPlan plan_steps(const SamplerConfig& cfg, long num_samples, int dp_ranks);

// The epoch (fractional) at which `step` optimizer steps are done.
double epoch_at(long step, const StepPlan& plan);

// The sample indices of micro-batch `micro` of optimizer step `step` (0-based) on data-parallel rank
// `rank`, from the epoch's order. Epochs reshuffle.
std::vector<std::int64_t> micro_batch_indices(const SamplerConfig& cfg, const StepPlan& plan,
                                              const std::vector<std::int64_t>& epoch_order, long step, int micro,
                                              int rank, int dp_ranks);

}  // namespace shardft
