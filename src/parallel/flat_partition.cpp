#include "parallel/flat_partition.hpp"

#include <algorithm>
#include <stdexcept>

namespace shardft {

bool in_param_set(const ParamSpec& p, ParamSet set) {
  if (p.nf4) return false;  // NF4 weights are held whole by the frozen store's Nf4Weights, outside any partition
  return set == ParamSet::all || (set == ParamSet::frozen) == p.frozen;
}

FlatPartition::FlatPartition(const ParamLayout& layout, int num_shards, ParamSet set) : layout_(&layout), num_shards_(num_shards) {
  if (num_shards < 1) throw std::invalid_argument("FlatPartition: num_shards must be >= 1");
  const std::size_t np = layout.params().size();
  unit_of_.assign(np, -1);
  offset_in_unit_.assign(np, 0);
  numel_.resize(np);
  for (std::size_t p = 0; p < np; ++p) numel_[p] = layout.params()[p].numel();
  const std::int64_t quantum = kAlign * num_shards;
  for (std::size_t b = 0; b < layout.blocks().size(); ++b) {
    FlatUnit u;
    u.block = static_cast<int>(b);
    for (int p : layout.blocks()[b].params) {
      if (unit_of_[p] >= 0 || !in_param_set(layout.params()[p], set)) continue;  // owned by an earlier block (tied embedding)
      unit_of_[p] = static_cast<int>(b);
      offset_in_unit_[p] = u.numel;
      u.params.push_back(p);
      u.param_offset.push_back(u.numel);
      u.numel += layout.params()[p].numel();
    }
    u.padded = (u.numel + quantum - 1) / quantum * quantum;
    u.shard = u.padded / num_shards;
    u.full_offset = full_numel_;
    u.shard_offset = shard_numel_;
    full_numel_ += u.padded;
    shard_numel_ += u.shard;
    units_.push_back(std::move(u));
  }
  block_units_.resize(layout.blocks().size());
  for (std::size_t b = 0; b < layout.blocks().size(); ++b) {
    for (int p : layout.blocks()[b].params) {
      if (unit_of_[p] < 0 || units_[unit_of_[p]].numel == 0) continue;
      auto& v = block_units_[b];
      if (std::find(v.begin(), v.end(), unit_of_[p]) == v.end()) v.push_back(unit_of_[p]);
    }
  }
}

}  // namespace shardft
