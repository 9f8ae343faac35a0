// Stage 0: every rank holds the whole gradient, accumulates every micro-batch into it and sums it over
// the group once, blocking, after the step's last micro-batch (its bf16 form and the in-place sum over
// the whole replicated gradient have no bucketed path). The owned region is the whole gradient. The
// step's sum starts stale (grad_sum_state.hpp) and is settled before the sum over the group.
#include <string>

#include "parallel/zero/grad_reducer_variants.hpp"

namespace shardft {
namespace {

class AllReduceReducer : public GradReducer {
 public:
  AllReduceReducer(const FlatPartition& part, Communicator& group, bool bf16)
      : part_(part), group_(group), bf16_(bf16), full_(std::string("zero_full_grads"), part.full_numel()), sums_(part) {}
  void begin_step() override { sums_.start(); }
  GradWrite grad(int param, GradUse use) override { return sums_.claim(param, full_unit_slice(part_, full_, param), use); }
  void unit_done(int, const MicroBatch&) override {}
  void end_micro_batch(const MicroBatch& mb) override {
    if (!mb.last()) return;
    for (std::size_t u = 0; u < part_.units().size(); ++u) {
      sums_.settle(static_cast<int>(u), full_.data() + part_.units()[u].full_offset);
    }
    all_reduce_gradient(group_, full_, bf16_);
  }
  View1<float> owned() const override { return full_; }
  std::int64_t persistent_elements() const override { return static_cast<std::int64_t>(full_.extent(0)); }

 private:
  const FlatPartition& part_;
  Communicator& group_;
  bool bf16_;
  View1<float> full_;
  GradSumState sums_;
};

}  // namespace

std::unique_ptr<GradReducer> make_all_reduce_reducer(const FlatPartition& part, Communicator& group, bool bf16) {
  return std::make_unique<AllReduceReducer>(part, group, bf16);
}

}  // namespace shardft
