// kernels/avx512_swiglu.hpp where the build has no AVX-512 kernels (a CUDA build, or a compiler without
// AVX-512 intrinsics): swiglu_fits is false, so the SwiGLU kernels keep their generic loops.
#include <stdexcept>

#include "kernels/avx512_swiglu.hpp"

namespace shardft::avx512 {

namespace {
[[noreturn]] void unavailable() { throw std::logic_error("avx512 SwiGLU rows: this build has no AVX-512 kernels"); }
}  // namespace

bool swiglu_fits() { return false; }
void swiglu_forward_row(const float*, const float*, float*, std::int64_t) { unavailable(); }
void swiglu_backward_row(const float*, const float*, const float*, float*, float*, std::int64_t) { unavailable(); }
void swiglu_forward_row_bf16(const std::uint16_t*, const std::uint16_t*, std::uint16_t*, std::int64_t) {
  unavailable();
}
void swiglu_backward_row_bf16(const std::uint16_t*, const std::uint16_t*, const std::uint16_t*, std::uint16_t*,
                              std::uint16_t*, std::uint16_t*, std::int64_t) {
  unavailable();
}

}  // namespace shardft::avx512
