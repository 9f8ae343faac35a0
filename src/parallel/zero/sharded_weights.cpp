// Stage 3: each rank holds its shard of every unit. Acquiring a block gathers its units (unless a
// prefetch already did), prefetches the blocks that come next in the pass's direction, and with hpZ
// keeps, in forward, this rank's slice of a node-local secondary copy that the block's backward gathers
// instead (nothing crosses nodes then). Releasing gives a unit back once no acquire holds it.
// How a unit travels is picked once: in its storage's dtype, as int8 blocks under qwZ, or, for fp32
// storage of bf16 values, as bf16 (lossless, half the bytes).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/cast_collectives.hpp"
#include "comm/quantized_collectives.hpp"
#include "parallel/zero/weight_store_variants.hpp"

namespace shardft {
namespace {

enum class GatherKind { as_stored, int8_blocks, as_bf16 };

class ShardedWeights : public WeightStore {
 public:
  ShardedWeights(const FlatPartition& part, const OwnedRegion& owned, const ZeroConfig& cfg, const ParallelPlan& plan,
                 BufferPool& pool);

  void acquire(int block, Pass pass) override;
  void release(int block, Pass pass) override;
  void progress() override;
  void drain() override;
  void set_nonfinite_counter(Unmanaged1<double> counter) override { nonfinite_ = counter; }
  void fill_layout(Communicator& group, LayoutWindow& out, std::size_t first, std::size_t last) const override {
    owned_.fill_layout(shard_.widened(), group, out, first, last);
  }
  std::int64_t bytes() const override { return shard_.bytes(); }
  std::int64_t peak_gathered_bytes() const override { return peak_; }

 protected:
  const WeightBuffer& owned_buffer() const override { return shard_; }
  const WeightBuffer& buffer_of(int param, std::int64_t* offset) override;

 private:
  void gather_unit(int unit, bool nonblocking, Pass pass);
  RequestPtr start_gather(GatherKind kind, Communicator& group, const WeightBuffer& src, std::int64_t offset,
                          std::int64_t count, WeightBuffer& dst);
  void prefetch_after(int block, Pass pass);
  void keep_secondary_copy(int unit);
  bool is_gathered(int unit) const { return !gathered_[unit].empty(); }
  void give_back_gathered(int unit);
  void track_peak();

  Communicator& group_;
  Communicator* hpz_;  // hpZ's node-local group, or nullptr
  WeightStorage storage_;
  GatherKind primary_, secondary_kind_;
  int quantization_block_;
  std::int64_t prefetch_elements_;
  WeightBuffer shard_;                    // this rank's shard of every unit
  std::vector<WeightBuffer> gathered_;    // per unit, while acquired or prefetched
  std::vector<RequestPtr> pending_;       // per unit, a prefetch in flight
  std::vector<int> refcount_;
  std::vector<WeightBuffer> secondary_;   // hpZ: per unit, this rank's slice of the secondary partition
  Unmanaged1<double> nonfinite_;          // qwZ: see ZeroEngine::set_nonfinite_counter
  std::int64_t peak_ = 0;
};

ShardedWeights::ShardedWeights(const FlatPartition& part, const OwnedRegion& owned, const ZeroConfig& cfg,
                               const ParallelPlan& plan, BufferPool& pool)
    : WeightStore(part, owned, pool, weight_rounding(cfg), false),
      group_(plan.shard()),
      hpz_(cfg.hpz_partition_size > 1 ? plan.hpz() : nullptr),
      storage_(weight_storage(cfg)),
      quantization_block_(cfg.quantization_block),
      prefetch_elements_(cfg.prefetch_elements),
      shard_(storage_, part.shard_numel(), storage_ == WeightStorage::bf16 ? "zero_shard_weights_bf16" : "zero_shard_weights"),
      gathered_(part.units().size()),
      pending_(part.units().size()),
      refcount_(part.units().size(), 0),
      secondary_(part.units().size()) {
  const bool bf16_in_f32 = storage_ == WeightStorage::f32 && cfg.dtype == ComputeDtype::bf16;
  primary_ = cfg.quantized_weights ? GatherKind::int8_blocks : bf16_in_f32 ? GatherKind::as_bf16 : GatherKind::as_stored;
  secondary_kind_ = bf16_in_f32 ? GatherKind::as_bf16 : GatherKind::as_stored;
}

RequestPtr ShardedWeights::start_gather(GatherKind kind, Communicator& group, const WeightBuffer& src,
                                        std::int64_t offset, std::int64_t count, WeightBuffer& dst) {
  const std::size_t n = static_cast<std::size_t>(count);
  switch (kind) {
    case GatherKind::int8_blocks:
      return iquantized_all_gather_int8(group, static_cast<const float*>(src.at(offset)), n,
                                        static_cast<float*>(dst.at(0)), quantization_block_, nonfinite_);
    case GatherKind::as_bf16:
      return iall_gather_as_bf16(group, static_cast<const float*>(src.at(offset)), n, static_cast<float*>(dst.at(0)));
    case GatherKind::as_stored:
      break;
  }
  return group.iall_gather(src.at(offset), dst.at(0), n, src.dtype());
}

void ShardedWeights::gather_unit(int unit, bool nonblocking, Pass pass) {
  const FlatUnit& u = part_.units()[unit];
  if (gathered_[unit].empty()) {
    gathered_[unit] = WeightBuffer::take(pool_, storage_, u.padded,
                                         storage_ == WeightStorage::bf16 ? "zero_gathered_bf16" : "zero_gathered");
  }
  RequestPtr r;
  if (pass == Pass::backward && !secondary_[unit].empty()) {
    // hpZ: backward gathers the node-local secondary copy; nothing crosses nodes.
    r = start_gather(secondary_kind_, *hpz_, secondary_[unit], 0, u.padded / hpz_->size(), gathered_[unit]);
  } else {
    r = start_gather(primary_, group_, shard_, u.shard_offset, u.shard, gathered_[unit]);
  }
  if (nonblocking) {
    pending_[unit] = std::move(r);
  } else {
    r->wait();
  }
  track_peak();
}

void ShardedWeights::give_back_gathered(int unit) {
  gathered_[unit].give(pool_);
  for (int p : part_.units()[unit].params) drop_widened(p);  // copies of what was gathered
}

void ShardedWeights::acquire(int block, Pass pass) {
  // hpZ: what forward gathers, backward gathers again from the node-local copy (not the head's: its
  // forward and backward are one turn).
  const bool keep_secondary = hpz_ && pass == Pass::forward && block != part_.head_block();
  for (int u : part_.units_of_block(block)) {
    ++refcount_[u];
    if (pending_[u]) {
      pending_[u]->wait();
      pending_[u].reset();
    } else if (!is_gathered(u)) {
      gather_unit(u, false, pass);
    }
    if (keep_secondary) keep_secondary_copy(u);
  }
  prefetch_after(block, pass);
}

// Prefetch the blocks that come next: up the layers in forward, down them in backward. The next block
// always; blocks after it while the weights gathered ahead (in flight or waiting for their acquire)
// stay within prefetch_elements (allgather_bucket_size).
void ShardedWeights::prefetch_after(int block, Pass pass) {
  const int head = part_.head_block(), dir = pass == Pass::forward ? 1 : -1;
  std::int64_t ahead = 0;
  for (int next = block + dir; next >= 0 && next <= head; next += dir) {
    std::int64_t need = 0;
    for (int u : part_.units_of_block(next)) {
      if (pending_[u]) {
        ahead += part_.units()[u].padded;
      } else if (!is_gathered(u)) {
        need += part_.units()[u].padded;
      }
    }
    if (next != block + dir && (prefetch_elements_ <= 0 || ahead + need > prefetch_elements_)) return;
    for (int u : part_.units_of_block(next)) {
      if (!pending_[u] && !is_gathered(u)) gather_unit(u, true, pass);
    }
    ahead += need;
  }
}

// Nonblocking collectives advance only inside MPI calls: one test per call during compute (a test
// drives every request in flight, so one is enough).
void ShardedWeights::progress() {
  for (const RequestPtr& r : pending_) {
    if (r) {
      r->test();
      return;
    }
  }
}

void ShardedWeights::keep_secondary_copy(int unit) {
  // This rank's 1/h of the unit as gathered in forward (after qwZ's dequantization, so backward sees
  // exactly the weights forward saw); consumed by the unit's backward gather.
  const std::int64_t piece = part_.units()[unit].padded / hpz_->size();
  if (secondary_[unit].empty()) {
    secondary_[unit] = WeightBuffer::take(pool_, storage_, piece,
                                          storage_ == WeightStorage::bf16 ? "hpz_secondary_bf16" : "hpz_secondary");
  }
  secondary_[unit].copy_from(gathered_[unit], hpz_->rank() * piece, piece);
}

const WeightBuffer& ShardedWeights::buffer_of(int param, std::int64_t* offset) {
  const int u = part_.unit_of(param);
  if (refcount_[u] == 0 || pending_[u]) {
    throw std::logic_error("weight of '" + part_.layout().params()[param].name + "' read outside acquire/release");
  }
  *offset = part_.offset_in_unit(param);
  return gathered_[u];
}

void ShardedWeights::release(int block, Pass pass) {
  for (int u : part_.units_of_block(block)) {
    if (--refcount_[u] == 0 && !pending_[u]) give_back_gathered(u);
    if (pass == Pass::backward && refcount_[u] == 0) secondary_[u].give(pool_);  // its backward gather is done
  }
}

void ShardedWeights::drain() {
  for (std::size_t u = 0; u < gathered_.size(); ++u) {
    if (pending_[u]) {
      pending_[u]->wait();
      pending_[u].reset();
    }
    if (refcount_[u] == 0) give_back_gathered(static_cast<int>(u));
    secondary_[u].give(pool_);
  }
}

void ShardedWeights::track_peak() {
  std::int64_t held = 0;
  for (const WeightBuffer& b : gathered_) held += b.bytes();
  peak_ = std::max(peak_, held);
}

}  // namespace

std::unique_ptr<WeightStore> make_sharded_weights(const FlatPartition& part, const OwnedRegion& owned,
                                                  const ZeroConfig& cfg, const ParallelPlan& plan, BufferPool& pool) {
  return std::make_unique<ShardedWeights>(part, owned, cfg, plan, pool);
}

}  // namespace shardft
