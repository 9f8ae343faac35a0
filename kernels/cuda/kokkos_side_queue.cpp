// kernels/side_queue.hpp where Kokkos runs on CUDA: a CUDA stream of its own (kernels/cuda/side_stream)
// with a Kokkos instance on it, below the compute stream in priority; marks are events.
#include "kernels/side_queue.hpp"

#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/side_stream.hpp"

namespace shardft {

// A CUDA stream with a Kokkos instance on it; an event per mark and one for "the compute work so far".
struct SideQueue::Impl {
  cudaStream_t stream = nullptr;
  std::optional<Kokkos::Cuda> space;
  std::vector<cudaEvent_t> marks;
  std::vector<char> pending;
  cudaEvent_t compute_done = nullptr;

  int compute_priority = 0, side_priority = 0;

  explicit Impl(int n) : stream(cuda::create_side_stream()), marks(n, nullptr), pending(n, 0) {
    compute_priority = cuda::raise_stream_priority(compute());
    side_priority = cuda::stream_priority(stream);
    space.emplace(stream);
    for (cudaEvent_t& e : marks) e = cuda::create_order_event();
    compute_done = cuda::create_order_event();
  }
  ~Impl() {
    cuda::synchronize_stream(stream);
    space.reset();  // the instance before its stream
    for (cudaEvent_t e : marks) cuda::destroy_event(e);
    cuda::destroy_event(compute_done);
    cuda::destroy_stream(stream);
  }
  static cudaStream_t compute() { return Kokkos::Cuda().cuda_stream(); }
};

SideQueue::SideQueue(int marks) : marks_(marks) {
  check_marks(marks);
  impl_ = std::make_unique<Impl>(marks);
}

SideQueue::~SideQueue() = default;

ExecSpace SideQueue::space() const { return *impl_->space; }
bool SideQueue::separate_queues() { return true; }

void SideQueue::follow_compute() {
  cuda::record_event(impl_->compute_done, Impl::compute());
  cuda::stream_wait_event(impl_->stream, impl_->compute_done);
}

void SideQueue::mark(int k) {
  check_mark(k, impl_->marks.size());
  cuda::record_event(impl_->marks[k], impl_->stream);
  impl_->pending[k] = 1;
}

void SideQueue::wait_for(int k) {
  check_mark(k, impl_->marks.size());
  if (!impl_->pending[k]) return;
  cuda::stream_wait_event(Impl::compute(), impl_->marks[k]);
  impl_->pending[k] = 0;
}

std::string SideQueue::describe() const {
  return "a CUDA stream of its own at priority " + std::to_string(impl_->side_priority) +
         ", under the compute stream's " + std::to_string(impl_->compute_priority) + " (lower runs first)";
}

}  // namespace shardft
