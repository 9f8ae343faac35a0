#pragma once
// Scratch a kernel needs during one call, kept from call to call under its name: the first call of a
// size allocates, later calls of that size or less reuse the memory. A training step after its first
// then allocates nothing (on a GPU an allocation is a cudaMalloc, and freeing it fences the whole
// device). Freed when Kokkos finalizes.
//
// One buffer per name and memory space: a caller must not hold two views of one name at once, and a
// view is valid until the next request of that name for more. Host thread only, like kernel launches.
#include <cstddef>
#include <type_traits>

#include "kernels/types.hpp"

namespace shardft {

namespace scratch_detail {
// `bytes` (8-byte aligned) of the named buffer in device (MemSpace) or host memory; `zeroed`: filled
// with zeros whenever it is (re)allocated.
void* named_scratch(const char* name, std::size_t bytes, bool host, bool zeroed = false);
}  // namespace scratch_detail

// Frees every named buffer (and the counters below): the next request of each allocates again. For
// measuring what a step holds as a fresh process would (tests); no view of a buffer may be in use.
void release_kernel_scratch();

template <class T, class Space = MemSpace>
Kokkos::View<T*, Kokkos::LayoutRight, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> kernel_scratch(
    const char* name, std::size_t n) {
  constexpr bool host = std::is_same<Space, HostSpace>::value && !std::is_same<MemSpace, HostSpace>::value;
  using Result = Kokkos::View<T*, Kokkos::LayoutRight, Space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  return Result(static_cast<T*>(scratch_detail::named_scratch(name, n * sizeof(T), host)), n);
}

template <class T>
Unmanaged2<T> kernel_scratch(const char* name, std::size_t rows, std::size_t cols) {
  return Unmanaged2<T>(static_cast<T*>(scratch_detail::named_scratch(name, rows * cols * sizeof(T), false)), rows, cols);
}

// Counters that are zero when first handed out (allocated zeroed; a longer request allocates zeroed
// again): for kernels that take tickets and set their counters back to zero before they end
// (kernels/column_sum_tickets.hpp), so no launch zeroes them per call.
inline Unmanaged1<int> kernel_counters(const char* name, std::size_t n) {
  return Unmanaged1<int>(static_cast<int*>(scratch_detail::named_scratch(name, n * sizeof(int), false, true)), n);
}

}  // namespace shardft
