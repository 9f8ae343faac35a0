// Stage 0: every rank holds the whole gradient, accumulates every micro-batch into it and sums it over
// the group once, blocking, after the step's last micro-batch (its bf16 form and the in-place sum over
// the whole replicated gradient have no bucketed path). The owned region is the whole gradient.
#include <string>

#include "parallel/zero/grad_reducer_variants.hpp"

namespace shardft {
namespace {

class AllReduceReducer : public GradReducer {
 public:
  AllReduceReducer(const FlatPartition& part, Communicator& group, bool bf16)
      : part_(part), group_(group), bf16_(bf16), full_(std::string("zero_full_grads"), part.full_numel()) {}
  void begin_step() override { Kokkos::deep_copy(ExecSpace(), full_, 0.f); }
  Unmanaged1<float> grad(int param) override { return full_unit_slice(part_, full_, param); }
  void unit_done(int, const MicroBatch&) override {}
  void end_micro_batch(const MicroBatch& mb) override {
    if (mb.last()) all_reduce_gradient(group_, full_, bf16_);
  }
  View1<float> owned() const override { return full_; }
  std::int64_t persistent_elements() const override { return static_cast<std::int64_t>(full_.extent(0)); }

 private:
  const FlatPartition& part_;
  Communicator& group_;
  bool bf16_;
  View1<float> full_;
};

}  // namespace

std::unique_ptr<GradReducer> make_all_reduce_reducer(const FlatPartition& part, Communicator& group, bool bf16) {
  return std::make_unique<AllReduceReducer>(part, group, bf16);
}

}  // namespace shardft
