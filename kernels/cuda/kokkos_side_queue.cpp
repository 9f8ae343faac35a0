// kernels/side_queue.hpp where Kokkos runs on CUDA: a CUDA stream of its own (kernels/cuda/side_stream)
// with a Kokkos instance on it, below the compute stream in priority; marks are events.
#include "kernels/side_queue.hpp"

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/cuda/side_stream.hpp"

namespace shardft {

// A CUDA stream with a Kokkos instance on it; an event per mark and one for "the compute work so far".
struct SideQueue::Impl {
  cudaStream_t stream = nullptr;
  std::optional<Kokkos::Cuda> space;
  std::vector<cudaEvent_t> marks;
  std::vector<char> pending;
  int pending_count = 0;
  cudaEvent_t compute_done = nullptr;

  int compute_priority = 0, side_priority = 0;
  int gemm_sms = 0;  // while side work is pending: the GEMMs' SM count target (0: every SM)

  explicit Impl(int n) : stream(cuda::create_side_stream()), marks(n, nullptr), pending(n, 0) {
    compute_priority = cuda::raise_stream_priority(compute());
    side_priority = cuda::stream_priority(stream);
    space.emplace(stream);
    for (cudaEvent_t& e : marks) e = cuda::create_order_event();
    compute_done = cuda::create_order_event();
  }
  ~Impl() {
    if (gemm_sms > 0 && pending_count > 0) cuda::set_gemm_sm_target(0);
    cuda::synchronize_stream(stream);
    space.reset();  // the instance before its stream
    for (cudaEvent_t e : marks) cuda::destroy_event(e);
    cuda::destroy_event(compute_done);
    cuda::destroy_stream(stream);
  }
  static cudaStream_t compute() { return Kokkos::Cuda().cuda_stream(); }
};

SideQueue::SideQueue(int marks, int gemm_sm_reserve) : marks_(marks), gemm_sm_reserve_(gemm_sm_reserve) {
  check_marks(marks, gemm_sm_reserve);
  const int sms = gemm_sm_reserve > 0 ? cuda::sm_count() : 0;
  if (gemm_sm_reserve > 0 && gemm_sm_reserve >= sms) {
    throw std::invalid_argument("optimizer_overlap_sms " + std::to_string(gemm_sm_reserve) + " leaves none of the " +
                                std::to_string(sms) + " SMs of this GPU to the GEMMs");
  }
  impl_ = std::make_unique<Impl>(marks);
  if (gemm_sm_reserve > 0) impl_->gemm_sms = sms - gemm_sm_reserve;
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
  if (impl_->pending[k]) return;
  impl_->pending[k] = 1;
  // The first pending mark: the GEMMs issued from now on leave the reserved SMs to the side work.
  if (impl_->pending_count++ == 0 && impl_->gemm_sms > 0) cuda::set_gemm_sm_target(impl_->gemm_sms);
}

void SideQueue::wait_for(int k) {
  check_mark(k, impl_->marks.size());
  if (!impl_->pending[k]) return;
  cuda::stream_wait_event(Impl::compute(), impl_->marks[k]);
  impl_->pending[k] = 0;
  // The last: the compute work issued from now on follows every side work, so its GEMMs take all SMs.
  if (--impl_->pending_count == 0 && impl_->gemm_sms > 0) cuda::set_gemm_sm_target(0);
}

std::string SideQueue::describe() const {
  std::string d = "a CUDA stream of its own at priority " + std::to_string(impl_->side_priority) +
                  ", under the compute stream's " + std::to_string(impl_->compute_priority) + " (lower runs first)";
  if (impl_->gemm_sms > 0) {
    d += "; while it runs, the GEMMs are sized for " + std::to_string(impl_->gemm_sms) + " SMs, leaving " +
         std::to_string(gemm_sm_reserve_) + " to it (optimizer_overlap_sms)";
  }
  return d;
}

}  // namespace shardft
