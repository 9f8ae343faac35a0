// Stages 0-2: every rank holds every unit's compute weights whole, in one buffer laid out as the
// partition's full units. At stages 1-2 each rank updates only its shard of each unit (at the shard's
// place in that buffer) and gathers the others' in place afterwards, with up to
// allgather_bucket_elements in flight at once (DeepSpeed's allgather_bucket_size: it bounds the
// gathers' transient buffers). Nothing is gathered per block: acquire and release have nothing to do.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "kernels/elementwise.hpp"
#include "parallel/zero/weight_store_variants.hpp"

namespace shardft {
namespace {

class ReplicatedWeights : public WeightStore {
 public:
  ReplicatedWeights(const FlatPartition& part, const OwnedRegion& owned, const ZeroConfig& cfg, Communicator& group,
                    BufferPool& pool, View1<float> master)
      : WeightStore(part, owned, pool, weight_rounding(cfg), true),
        group_(group),
        shares_(owned.sharded()),
        allgather_bucket_elements_(cfg.allgather_bucket_elements),
        aliased_(master.extent(0) > 0),
        full_(aliased_ ? WeightBuffer::over(master)
                       : WeightBuffer(weight_storage(cfg), part.full_numel(),
                                      weight_storage(cfg) == WeightStorage::bf16 ? "zero_full_weights_bf16"
                                                                                 : "zero_full_weights")) {}

  bool is_copy() const override { return !aliased_; }
  void share() override;
  void fill_layout(Communicator&, LayoutWindow& out, std::size_t first, std::size_t last) const override;
  std::int64_t bytes() const override { return aliased_ ? 0 : full_.bytes(); }  // aliased: counted as optimizer state

 protected:
  const WeightBuffer& owned_buffer() const override { return full_; }
  const WeightBuffer& buffer_of(int param, std::int64_t* offset) override {
    *offset = part_.units()[part_.unit_of(param)].full_offset + part_.offset_in_unit(param);
    return full_;
  }

 private:
  Communicator& group_;
  bool shares_;
  std::int64_t allgather_bucket_elements_;
  bool aliased_;
  WeightBuffer full_;
};

void ReplicatedWeights::share() {
  WeightStore::share();
  if (!shares_) return;
  std::deque<RequestPtr> inflight;
  std::deque<std::int64_t> sizes;
  std::int64_t in_flight = 0;
  const int rank = group_.rank();
  for (const FlatUnit& u : part_.units()) {
    if (u.padded == 0) continue;  // a block without parameters of this partition's set
    inflight.push_back(group_.iall_gather(full_.at(u.full_offset + rank * u.shard), full_.at(u.full_offset),
                                          static_cast<std::size_t>(u.shard), full_.dtype()));
    sizes.push_back(u.padded);
    in_flight += u.padded;
    while (!inflight.empty() && in_flight > allgather_bucket_elements_) {
      inflight.front()->wait();
      inflight.pop_front();
      in_flight -= sizes.front();
      sizes.pop_front();
    }
  }
  for (auto& r : inflight) r->wait();
}

// Unit by unit, each parameter copied into the window: a bf16 store widens one unit at a time, not the
// whole model. Nothing here is collective, so a rank that keeps no copy (a window without values) does
// nothing.
void ReplicatedWeights::fill_layout(Communicator&, LayoutWindow& out, std::size_t first, std::size_t last) const {
  if (!out.keeps()) return;
  const bool bf16 = full_.storage() == WeightStorage::bf16;
  std::int64_t largest = 0;
  for (std::size_t ui = first; ui < last; ++ui) largest = std::max(largest, part_.units()[ui].padded);
  View1<float> widened("zero_export_unit", static_cast<std::size_t>(bf16 ? largest : 0));
  for (std::size_t ui = first; ui < last; ++ui) {
    const FlatUnit& u = part_.units()[ui];
    if (u.padded == 0) continue;
    if (bf16) {
      const Unmanaged1<float> w(widened.data(), u.padded);
      to_f32(full_.bf16s(u.full_offset, u.padded), w);
      owned_.unit_to_layout(ui, w, out);
    } else {
      owned_.unit_to_layout(ui, full_.f32(u.full_offset, u.padded), out);
    }
  }
}

}  // namespace

std::unique_ptr<WeightStore> make_replicated_weights(const FlatPartition& part, const OwnedRegion& owned,
                                                     const ZeroConfig& cfg, Communicator& group, BufferPool& pool,
                                                     View1<float> master) {
  return std::make_unique<ReplicatedWeights>(part, owned, cfg, group, pool, master);
}

}  // namespace shardft
