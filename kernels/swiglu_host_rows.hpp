#pragma once
// The SwiGLU kernels' host path where the host has AVX-512 BF16 (kernels/swiglu.cpp, kernels/swiglu_bf16.cpp):
// both dtypes run kernels/avx512_swiglu.hpp's rows there, so the bf16 outputs stay the fp32 ones rounded once.
#include <cstddef>
#include <cstdint>

#include "kernels/avx512_swiglu.hpp"
#include "kernels/types.hpp"

namespace shardft::swiglu_detail {

// `row(n)` for every row over the host's threads, and true, where the host has AVX-512 BF16; false
// elsewhere and on a GPU (a template, so that a GPU build never instantiates the host loop).
template <class Row>
bool on_avx512_rows(const char* name, std::size_t rows, const Row& row) {
  if constexpr (kComputeOnDevice) {
    return false;
  } else {
    if (!avx512::swiglu_fits()) return false;
    Kokkos::parallel_for(name, Kokkos::RangePolicy<ExecSpace>(0, static_cast<std::int64_t>(rows)), row);
    return true;
  }
}

}  // namespace shardft::swiglu_detail
