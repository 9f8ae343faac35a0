#pragma once
// How the parameters are laid out for sharding. Each block of the model (embedding, each layer,
// head) becomes one flat "unit" of the parameters it owns (a parameter shared by two blocks, the
// tied embedding, is owned by the first). A unit is padded to a multiple of N * kAlign elements so
// that it splits into N equal shards; rank r owns shard r of every unit, so a unit's gather is one
// all-gather and its gradient reduction one reduce-scatter.
// A partition may hold only some parameters (ParamSet): with LoRA the trainable A/B factors and the
// frozen base are two partitions of the same blocks, so unit u is block u's in both (possibly empty).
#include <cstdint>
#include <vector>

#include "model/param_layout.hpp"

namespace shardft {

// NF4 parameters (ParamSpec::nf4, QLoRA) belong to no set: the frozen store holds them as 4-bit blocks.
enum class ParamSet { all, trainable, frozen };
bool in_param_set(const ParamSpec& p, ParamSet set);

struct FlatUnit {
  int block = 0;                         // the block that owns these parameters
  std::vector<int> params;               // owned parameters, in layout order
  std::vector<std::int64_t> param_offset;  // each one's offset inside the unit
  std::int64_t numel = 0;                // real elements
  std::int64_t padded = 0;               // numel rounded up to a multiple of N * kAlign
  std::int64_t shard = 0;                // padded / N
  std::int64_t full_offset = 0;          // where the unit starts in the full (unsharded) flat buffer
  std::int64_t shard_offset = 0;         // where this rank's shard of it starts in the shard buffer
};

class FlatPartition {
 public:
  static constexpr std::int64_t kAlign = 16;  // 64-byte aligned shards for fp32

  FlatPartition(const ParamLayout& layout, int num_shards, ParamSet set = ParamSet::all);

  int num_shards() const { return num_shards_; }
  const ParamLayout& layout() const { return *layout_; }  // the layout it was made from (it must outlive it)
  const std::vector<FlatUnit>& units() const { return units_; }
  int unit_of(int param) const { return unit_of_[param]; }  // -1: not in this partition's set
  std::int64_t offset_in_unit(int param) const { return offset_in_unit_[param]; }
  std::int64_t numel_of(int param) const { return numel_[param]; }  // the parameter's elements
  int num_params() const { return static_cast<int>(numel_.size()); }  // of the layout, in the set or not
  int head_block() const { return static_cast<int>(units_.size()) - 1; }
  // Non-empty units whose weights `block` reads (its own, plus the tied embedding's for the head).
  const std::vector<int>& units_of_block(int block) const { return block_units_[block]; }
  std::int64_t full_numel() const { return full_numel_; }    // sum of padded
  std::int64_t shard_numel() const { return shard_numel_; }  // sum of shard

 private:
  const ParamLayout* layout_;
  int num_shards_;
  std::vector<FlatUnit> units_;
  std::vector<int> unit_of_;
  std::vector<std::int64_t> offset_in_unit_, numel_;
  std::vector<std::vector<int>> block_units_;
  std::int64_t full_numel_ = 0, shard_numel_ = 0;
};

}  // namespace shardft
