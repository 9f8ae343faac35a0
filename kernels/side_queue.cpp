// The side queue's parts every backend shares (kernels/side_queue.hpp); the queue itself is
// kernels/cuda/kokkos_side_queue.cpp where Kokkos runs on CUDA, kernels/host/side_queue.cpp elsewhere
// (CMake compiles one).
#include "kernels/side_queue.hpp"

#include <stdexcept>
#include <string>

namespace shardft {

void SideQueue::check_mark(int k, std::size_t n) {
  if (k < 0 || static_cast<std::size_t>(k) >= n) {
    throw std::out_of_range("SideQueue: mark " + std::to_string(k) + " of " + std::to_string(n));
  }
}

void SideQueue::check_marks(int marks, int gemm_sm_reserve) {
  if (marks < 0) throw std::invalid_argument("SideQueue: a negative number of marks");
  if (gemm_sm_reserve < 0) throw std::invalid_argument("SideQueue: a negative number of SMs to reserve");
}

void SideQueue::wait_for_all() {
  for (int k = 0; k < marks_; ++k) wait_for(k);
}

}  // namespace shardft
