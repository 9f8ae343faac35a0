// Stage 1: every rank accumulates the whole gradient locally over the micro-batches (nothing is
// communicated before the last), and in the last micro-batch's backward hands each unit to the
// reduction buckets as its block finishes, so the reduce-scatter overlaps the rest of backward. Units
// whose block never reported (no gradient flowed there) join at the end. The owned region is this
// rank's shard of every unit. The buckets' staging is not reported as a transient peak: the memory
// preflight counts the full gradient instead. The step's sum starts stale (grad_sum_state.hpp); a unit
// is settled as it is handed over.
#include <algorithm>
#include <string>
#include <vector>

#include "parallel/zero/grad_reducer_variants.hpp"

namespace shardft {
namespace {

class AccumulateThenScatter : public GradReducer {
 public:
  AccumulateThenScatter(const FlatPartition& part, Communicator& group, const GradBucketOptions& opt, BufferPool& pool)
      : part_(part),
        full_(std::string("zero_full_grads"), part.full_numel()),
        owned_(std::string("zero_grad_shard"), part.shard_numel()),
        buckets_(part, group, owned_, opt, pool),
        bucketed_(part.units().size(), 0),
        sums_(part) {}

  void begin_step() override {
    buckets_.finish();  // nothing should be in flight; never leave a collective behind
    std::fill(bucketed_.begin(), bucketed_.end(), 0);
    sums_.start();
    buckets_.begin_step();
  }
  GradWrite grad(int param, GradUse use) override { return sums_.claim(param, full_unit_slice(part_, full_, param), use); }
  void unit_done(int unit, const MicroBatch& mb) override {
    if (mb.last() && !bucketed_[unit]) hand_over(unit);  // the accumulated gradient is final now
  }
  void end_micro_batch(const MicroBatch& mb) override {
    if (!mb.last()) {
      buckets_.flush();
      return;
    }
    for (std::size_t u = 0; u < part_.units().size(); ++u) {
      if (!bucketed_[u] && part_.units()[u].padded > 0) hand_over(static_cast<int>(u));
    }
    buckets_.finish_step();  // before anything (the clip, the replicas) reads the gradient
  }
  void progress() override { buckets_.progress(); }
  void set_overlap(bool on) override { buckets_.set_overlap(on); }
  const GradBuckets* buckets() const override { return &buckets_; }
  View1<float> owned() const override { return owned_; }
  std::int64_t persistent_elements() const override {
    return static_cast<std::int64_t>(full_.extent(0) + owned_.extent(0));
  }

 private:
  void hand_over(int unit) {
    bucketed_[unit] = 1;
    float* values = full_.data() + part_.units()[unit].full_offset;
    sums_.settle(unit, values);
    buckets_.add(unit, values, {});
  }

  const FlatPartition& part_;
  View1<float> full_, owned_;
  GradBuckets buckets_;
  std::vector<char> bucketed_;  // units handed to the buckets this step
  GradSumState sums_;
};

}  // namespace

std::unique_ptr<GradReducer> make_accumulate_then_scatter_reducer(const FlatPartition& part, Communicator& group,
                                                                  const GradBucketOptions& opt, BufferPool& pool) {
  return std::make_unique<AccumulateThenScatter>(part, group, opt, pool);
}

}  // namespace shardft
