// Stages 2-3: no full gradient exists. Each unit's gradient lives in a buffer of its own (from the
// pool, a new sum when first asked for in a micro-batch: grad_sum_state.hpp, settled before it is
// reduced) while its block's backward runs, and is reduced as soon as the block is done, into this
// rank's shard:
//   bucketed: the unit joins the reduction buckets; a full bucket's reduce-scatter runs while backward
//     goes on. At the end of a micro-batch that is not the last, the last bucket starts and may stay in
//     flight through the next forward: buckets complete in the order they started, so the owned
//     gradient sums them in the same order whatever the timing.
//   int4 (qgZ): blocking, unit by unit, over the node group then across nodes: its second hop sends the
//     partial sums the first produced, re-quantized, so it is two all-to-alls with compute between
//     them, which one nonblocking request cannot carry without a progress thread to run that compute.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "comm/quantized_collectives.hpp"
#include "kernels/elementwise.hpp"
#include "parallel/zero/grad_reducer_variants.hpp"

namespace shardft {
namespace {

// What both share: the owned shard and the per-unit buffers.
class UnitGradients : public GradReducer {
 public:
  UnitGradients(const FlatPartition& part, BufferPool& pool)
      : part_(part),
        pool_(pool),
        owned_(std::string("zero_grad_shard"), part.shard_numel()),
        units_(part.units().size()),
        sums_(part) {}
  GradWrite grad(int param, GradUse use) override {
    const int u = part_.unit_of(param);
    if (units_[u].extent(0) == 0) {
      units_[u] = pool_.take(part_.units()[u].padded, "zero_unit_grad");
      sums_.start_unit(u);
      note_peak();
    }
    return sums_.claim(param, Unmanaged1<float>(units_[u].data() + part_.offset_in_unit(param), part_.numel_of(param)),
                       use);
  }
  View1<float> owned() const override { return owned_; }
  std::int64_t persistent_elements() const override { return static_cast<std::int64_t>(owned_.extent(0)); }
  std::int64_t peak_transient_elements() const override { return peak_; }

 protected:
  virtual std::int64_t in_flight_elements() const { return 0; }
  void note_peak() {
    std::int64_t held = in_flight_elements();
    for (const View1<float>& v : units_) held += static_cast<std::int64_t>(v.extent(0));
    peak_ = std::max(peak_, held);
  }

  const FlatPartition& part_;
  BufferPool& pool_;
  View1<float> owned_;
  std::vector<View1<float>> units_;  // per unit, during its block's backward
  GradSumState sums_;
  std::int64_t peak_ = 0;
};

class BucketedScatter : public UnitGradients {
 public:
  BucketedScatter(const FlatPartition& part, Communicator& group, const GradBucketOptions& opt, BufferPool& pool)
      : UnitGradients(part, pool), buckets_(part, group, owned_, opt, pool) {}
  void begin_step() override {
    buckets_.finish();  // nothing should be in flight; never leave a collective behind
    buckets_.begin_step();
  }
  void unit_done(int unit, const MicroBatch&) override {
    if (units_[unit].extent(0) == 0) return;  // no gradient reached it in this micro-batch
    sums_.settle(unit, units_[unit].data());
    buckets_.add(unit, units_[unit].data(), std::move(units_[unit]));  // held until reduced, then pooled
    note_peak();
  }
  void end_micro_batch(const MicroBatch& mb) override {
    if (mb.last()) {
      buckets_.finish_step();  // before anything (the clip, the replicas) reads the gradient
    } else {
      buckets_.flush();
    }
  }
  void progress() override { buckets_.progress(); }
  void set_overlap(bool on) override { buckets_.set_overlap(on); }
  const GradBuckets* buckets() const override { return &buckets_; }

 private:
  std::int64_t in_flight_elements() const override { return buckets_.held_elements(); }
  GradBuckets buckets_;
};

class Int4Scatter : public UnitGradients {
 public:
  Int4Scatter(const FlatPartition& part, Communicator& node, Communicator& cross, int block, BufferPool& pool)
      : UnitGradients(part, pool),
        node_(node),
        cross_(cross),
        block_(block),
        scratch_(std::string("zero_scratch_shard"), largest_shard(part)),
        writes_(part) {}
  void begin_step() override { writes_.begin_step(); }
  void unit_done(int unit, const MicroBatch&) override {
    if (units_[unit].extent(0) == 0) return;
    sums_.settle(unit, units_[unit].data());
    const FlatUnit& u = part_.units()[unit];
    const Unmanaged1<float> shard(owned_.data() + u.shard_offset, u.shard);
    const bool add = writes_.mark(unit);  // the first reduction of the step writes the shard itself
    float* out = add ? scratch_.data() : shard.data();
    quantized_reduce_scatter_int4(node_, cross_, units_[unit].data(), static_cast<std::size_t>(u.shard), out, block_,
                                  nonfinite_);
    if (add) add_inplace(shard, Unmanaged1<const float>(scratch_.data(), u.shard));
    pool_.give(units_[unit]);
  }
  void end_micro_batch(const MicroBatch& mb) override {
    if (mb.last()) writes_.zero_unwritten(owned_);
  }
  void set_nonfinite_counter(Unmanaged1<double> counter) override { nonfinite_ = counter; }

 private:
  static std::int64_t largest_shard(const FlatPartition& part) {
    std::int64_t m = 0;
    for (const FlatUnit& u : part.units()) m = std::max(m, u.shard);
    return m;
  }
  Communicator &node_, &cross_;
  int block_;
  View1<float> scratch_;  // receives one unit's reduce-scatter where it is added
  Unmanaged1<double> nonfinite_;
  OwnedShardWrites writes_;
};

}  // namespace

std::unique_ptr<GradReducer> make_bucketed_scatter_reducer(const FlatPartition& part, Communicator& group,
                                                           const GradBucketOptions& opt, BufferPool& pool) {
  return std::make_unique<BucketedScatter>(part, group, opt, pool);
}

std::unique_ptr<GradReducer> make_int4_scatter_reducer(const FlatPartition& part, const ParallelPlan& plan,
                                                       int quantization_block, BufferPool& pool) {
  return std::make_unique<Int4Scatter>(part, *plan.qgz_intra(), *plan.qgz_cross(), quantization_block, pool);
}

}  // namespace shardft
