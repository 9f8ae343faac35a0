// kernels/side_queue.hpp where Kokkos runs on the host: every kernel runs in issue order, so the side
// queue is the compute queue and a mark has nothing to wait for.
#include "kernels/side_queue.hpp"

#include <vector>

namespace shardft {

struct SideQueue::Impl {
  explicit Impl(int n) : pending(n, 0) {}
  std::vector<char> pending;
};

SideQueue::SideQueue(int marks) : marks_(marks) {
  check_marks(marks);
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
  return "the compute queue itself (this backend runs kernels in issue order: nothing runs beside them)";
}

}  // namespace shardft
