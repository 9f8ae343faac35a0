#pragma once
// The compute weights of one partition, as the model reads them: one variant per way of holding them,
// picked once by make_weight_store; the engine never asks which it has.
//   replicated (replicated_weights.cpp, stages 0-2): every unit whole on every rank; at stages 1-2
//     each rank writes its shard of each unit and the others' are gathered in place after an update;
//     at stage 0 in fp32 the buffer is the master weights themselves.
//   sharded (sharded_weights.cpp, stage 3): this rank's shard of every unit; a block's units gathered
//     when it is acquired (int8 under qwZ; from hpZ's node-local copy in backward), the blocks that
//     come next prefetched, released after.
// bf16 compute keeps bf16 storage (WeightBuffer), whose norm weights and biases weight() hands out as
// widened fp32 copies, kept until the weights change or (sharded) their unit is released.
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/flat_runs.hpp"
#include "model/param_source.hpp"
#include "parallel/buffer_pool.hpp"
#include "parallel/flat_partition.hpp"
#include "parallel/parallel_plan.hpp"
#include "parallel/zero/owned_region.hpp"
#include "parallel/zero/weight_buffer.hpp"
#include "parallel/zero/zero_config.hpp"

namespace shardft {

class WeightStore {
 public:
  // in_full_buffer: the owned region's compute weights lie at their place in a buffer of every unit
  // (replicated), else at the owned region's own offsets (stage 3's shards).
  WeightStore(const FlatPartition& part, const OwnedRegion& owned, BufferPool& pool, RunCast cast, bool in_full_buffer);
  virtual ~WeightStore() = default;

  // Whether the compute weights are a copy of the master weights (all but fp32 stage 0).
  virtual bool is_copy() const { return true; }
  // Where an update of the owned region writes its compute weights (with runs from compute_runs()).
  ComputeWeights owned_target() const { return owned_buffer().as_target(cast_); }
  // The owned region unit by unit, value the offset from an owned element to its compute weight
  // (kernels/flat_runs.hpp): the refresh's one launch, and the optimizer's fused copy with it.
  const std::vector<FlatRun>& compute_runs() const { return compute_runs_; }
  // The compute weights from `master` (laid out as the owned region), in one launch, then shared.
  void write_from(View1<float> master);
  // The same for one unit from `piece` (its owned segment's values, from offset 0), without sharing:
  // a load unit by unit calls share() after its last.
  void write_unit_from(std::size_t unit, View1<float> piece);
  // After the owned compute weights changed: stale copies dropped, and the ranks' shards gathered in
  // place where every rank holds every unit (stages 1-2).
  virtual void share();

  virtual void acquire(int /*block*/, Pass /*pass*/) {}
  virtual void release(int /*block*/, Pass /*pass*/) {}
  virtual void progress() {}
  // Waits for every prefetch and gives back every gathered unit not acquired (before weights change).
  virtual void drain() {}
  virtual void set_nonfinite_counter(Unmanaged1<double> /*counter*/) {}

  // A parameter of the partition in compute precision as fp32 (bf16 storage: a widened copy).
  Unmanaged1<const float> weight(int param);
  // The same as bf16 storage; empty where the storage is fp32.
  Unmanaged1<const bf16> weight_bf16(int param);

  // The compute weights of units [first, last) as fp32 into `out` (a window covering them) at the
  // partition's parameters, on every rank (collective where sharded), unit by unit; a window without
  // values (a rank that keeps no copy) only takes part in the collectives.
  virtual void fill_layout(Communicator& group, LayoutWindow& out, std::size_t first, std::size_t last) const = 0;
  virtual std::int64_t bytes() const = 0;
  virtual std::int64_t peak_gathered_bytes() const { return 0; }

 protected:
  // The whole buffer the owned region's compute weights are written into.
  virtual const WeightBuffer& owned_buffer() const = 0;
  // Where `param`'s compute weights are now (its unit acquired, where that matters), and its offset.
  virtual const WeightBuffer& buffer_of(int param, std::int64_t* offset) = 0;
  void drop_widened(int param) { pool_.give(widened_[param]); }
  void cast_to_compute(View1<float> src, const FlatRuns& runs);

  const FlatPartition& part_;
  const OwnedRegion& owned_;
  BufferPool& pool_;
  RunCast cast_;

 private:
  std::vector<View1<float>> widened_;  // bf16 storage: per param, weight()'s fp32 copy while valid
  std::vector<FlatRun> compute_runs_;
  FlatRuns write_runs_;                // compute_runs_ on the device
};

// The store of the partition's compute weights for `cfg` over the plan's shard group. `master`: the
// master weights where they can serve as the compute weights (fp32 stage 0), else empty.
std::unique_ptr<WeightStore> make_weight_store(const FlatPartition& part, const OwnedRegion& owned, const ZeroConfig& cfg,
                                               const ParallelPlan& plan, BufferPool& pool, View1<float> master);

// The storage bf16 compute keeps (bf16, except under qwZ), and how fp32 storage rounds what it stores.
WeightStorage weight_storage(const ZeroConfig& cfg);
RunCast weight_rounding(const ZeroConfig& cfg);

}  // namespace shardft
