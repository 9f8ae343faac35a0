// kernels/avx512_cross_entropy.hpp where the build has no AVX-512 kernels (a CUDA build, or a compiler
// without AVX-512 intrinsics): cross_entropy_fits is false, so the loss keeps its generic kernels.
#include <stdexcept>

#include "kernels/avx512_cross_entropy.hpp"

namespace shardft::avx512 {

namespace {
[[noreturn]] void unavailable() {
  throw std::logic_error("avx512 cross-entropy rows: this build has no AVX-512 kernels");
}
}  // namespace

bool cross_entropy_fits() { return false; }
float row_logsumexp(const float*, std::int64_t) { unavailable(); }
float row_logsumexp(const std::uint16_t*, std::int64_t) { unavailable(); }
void row_softmax_gradient(float*, std::int64_t, float, std::int64_t, float) { unavailable(); }
void row_softmax_gradient(std::uint16_t*, std::int64_t, float, std::int64_t, float) { unavailable(); }

}  // namespace shardft::avx512
