// kernels/side_queue.hpp where Kokkos runs on the host: every kernel runs in issue order, so the side
// queue is the compute queue and a mark has nothing to wait for.
#include "kernels/side_queue.hpp"

#include <string>
#include <vector>

namespace shardft {

struct SideQueue::Impl {
  explicit Impl(int n) : pending(n, 0) {}
  std::vector<char> pending;
};

SideQueue::SideQueue(int marks, int gemm_sm_reserve) : marks_(marks), gemm_sm_reserve_(gemm_sm_reserve) {
  check_marks(marks, gemm_sm_reserve);
  impl_ = std::make_unique<Impl>(marks);
}

SideQueue::~SideQueue() = default;

ExecSpace SideQueue::space() const { return ExecSpace(); }
bool SideQueue::separate_queues() { return false; }
void SideQueue::follow_compute() {}

void SideQueue::mark(int k) {
  check_mark(k, impl_->pending.size());
  impl_->pending[k] = 1;
}

void SideQueue::wait_for(int k) {
  check_mark(k, impl_->pending.size());
  impl_->pending[k] = 0;
}

std::string SideQueue::describe() const {
  return std::string("the compute queue itself (this backend runs kernels in issue order: nothing runs beside them") +
         (gemm_sm_reserve_ > 0 ? "; no GPU, so no SMs to reserve for it: optimizer_overlap_sms has no effect)" : ")");
}

}  // namespace shardft
