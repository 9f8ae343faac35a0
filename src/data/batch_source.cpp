#include "data/batch_source.hpp"

#include "data/packing.hpp"

namespace shardft {

BatchSource::BatchSource(const SamplerConfig& cfg, const std::vector<TokenizedSample>& samples,
                         const std::vector<std::vector<std::int64_t>>& rows, const StepPlan& plan, int rank,
                         int dp_ranks, std::int32_t pad_id)
    : cfg_(cfg), samples_(samples), rows_(rows), plan_(plan), rank_(rank), dp_ranks_(dp_ranks), pad_id_(pad_id) {}

long BatchSource::num_units(const SamplerConfig& cfg, const std::vector<TokenizedSample>& samples,
                            const std::vector<std::vector<std::int64_t>>& rows) {
  return cfg.packing ? static_cast<long>(rows.size()) : static_cast<long>(samples.size());
}

std::vector<TokenBatch> BatchSource::step_batches(long step) {
  const long epoch = step / plan_.steps_per_epoch;
  if (epoch != order_epoch_) {  // a resumed run starts mid-epoch: the order is the epoch's, not the process's
    order_ = epoch_permutation(num_units(cfg_, samples_, rows_), cfg_.order_seed, epoch);
    order_epoch_ = epoch;
  }
  std::vector<TokenBatch> micro;
  for (int m = 0; m < cfg_.gradient_accumulation_steps; ++m) {
    const auto picked = micro_batch_indices(cfg_, plan_, order_, step, m, rank_, dp_ranks_);
    if (cfg_.packing) {
      std::vector<std::vector<std::int64_t>> picked_rows;
      for (std::int64_t u : picked) picked_rows.push_back(rows_[u]);
      micro.push_back(collate_packed(samples_, picked_rows, pad_id_));
    } else {
      micro.push_back(collate(samples_, picked, 1, pad_id_));
    }
  }
  return micro;
}

}  // namespace shardft
