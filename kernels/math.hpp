#pragma once
// Device-callable math across Kokkos versions: 3.4 keeps these in Kokkos::Experimental,
// 3.7+ and 4.x in Kokkos::. Kernels call kmath::exp etc. and build against both.
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace shardft {
namespace kmath {
#if KOKKOS_VERSION < 30700
using Kokkos::Experimental::cos;
using Kokkos::Experimental::exp;
using Kokkos::Experimental::isfinite;
using Kokkos::Experimental::log;
using Kokkos::Experimental::sin;
using Kokkos::Experimental::sqrt;
#else
using Kokkos::cos;
using Kokkos::exp;
using Kokkos::isfinite;
using Kokkos::log;
using Kokkos::sin;
using Kokkos::sqrt;
#endif
// exp(x) and a / b where a few ulps do not matter (SwiGLU's sigmoid, whose results are rounded to bf16):
// a GPU's hardware approximations (ex2.approx as __expf, 2 + 1.16|x| ulp; __fdividef: 2 ulp), which keep
// the elementwise kernels bound by memory rather than by the full-precision sequences; the host keeps
// exp and / (its results keep their bits).
KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
#if defined(__CUDA_ARCH__)
  // __expf's ex2.approx with results below 2^-126 flushed to zero: one instruction, where the unflushed
  // form adds a range test and two multiplies around it (nvcc builds without -ftz).
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f));
  return y;
#else
  return exp(x);
#endif
}
KOKKOS_INLINE_FUNCTION float fast_divide(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}

// splitmix64's finaliser of z + golden ratio: a counter-based hash, so a value keyed by an element's
// index is the same however the buffer is split across ranks, on host or device alike.
KOKKOS_INLINE_FUNCTION std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace kmath
}  // namespace shardft
