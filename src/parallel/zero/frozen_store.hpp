#pragma once
// The frozen parameters (LoRA's base, ParamSpec::frozen) as weights only: no master copy, gradient,
// optimizer state or reduction. Their compute weights live in a store of their own over the frozen
// partition, replicated or sharded as the trainable ones are; at stage 3 a block's frozen units are
// gathered with its trainable ones. With QLoRA the decoder linears' matrices are NF4 blocks instead
// (Nf4Weights: at stage 3 their bytes sharded and gathered per block, the next block's prefetched).
// A load fills an fp32 staging buffer one unit at a time (not the whole base at once: for a bf16 base
// that was twice its weights again at start), writes the unit's compute weights from it and drops it.
// A layout without frozen parameters gets an empty store, whose every call does nothing.
#include <cstdint>
#include <memory>
#include <vector>

#include "model/param_source.hpp"
#include "parallel/buffer_pool.hpp"
#include "parallel/flat_partition.hpp"
#include "parallel/zero/nf4_weights.hpp"
#include "parallel/parallel_plan.hpp"
#include "parallel/zero/owned_region.hpp"
#include "parallel/zero/weight_store.hpp"
#include "parallel/zero/zero_config.hpp"

namespace shardft {

class FrozenStore {
 public:
  FrozenStore(const ParamLayout& layout, const ZeroConfig& cfg, const ParallelPlan& plan);
  FrozenStore(const FrozenStore&) = delete;
  FrozenStore& operator=(const FrozenStore&) = delete;

  bool holds(int param) const { return part_.unit_of(param) >= 0 || (nf4_ && nf4_->holds(param)); }

  void init(const ModelConfig& model, std::uint64_t seed);
  void load(const std::vector<float>& layout_order);
  void load(const OwnedSliceReader& read, const Nf4Weights::StoredNf4& stored);

  void acquire(int block, Pass pass);
  void release(int block, Pass pass);
  void progress();
  void drain() { weights_->drain(); }
  void set_nonfinite_counter(Unmanaged1<double> counter) { weights_->set_nonfinite_counter(counter); }
  Unmanaged1<const float> weight(int param);
  Unmanaged1<const bf16> weight_bf16(int param);

  // The frozen parameters' compute weights (NF4: dequantized) of blocks [first, last) as fp32 into `out`
  // (a window covering them). Collective where sharded; a window without values (a rank that keeps no
  // copy) only takes part.
  void fill_layout(LayoutWindow& out, std::size_t first, std::size_t last);
  // Adds its bytes to a report of the trainable parts (its peaks may come at other times: the sum
  // bounds the true peak).
  void add_to(MemoryReport& m) const;
  const Nf4Weights* nf4() const { return nf4_.get(); }  // with QLoRA; else nullptr

 private:
  // fill(region, staging) fills a staging buffer laid out as `region`: the owned region cut to one unit.
  void write_from_staging(const std::function<void(const OwnedRegion&, View1<float>)>& fill);

  const ParamLayout& layout_;
  Communicator& group_;
  FlatPartition part_;
  OwnedRegion owned_;
  BufferPool pool_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<Nf4Weights> nf4_;
};

}  // namespace shardft
