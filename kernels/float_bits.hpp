#pragma once
// The 32 bits of an fp32 value and back, in any kernel: the one bit copy bf16.hpp and fp16.hpp build their
// conversions on. On a GPU a register move (nvcc keeps a byte loop a byte loop: five integer
// instructions per copy); elsewhere the compiler's builtin memcpy, one move, which leaves a loop that
// converts every element vectorisable (a byte loop inside it kept GCC from vectorising any of them).
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace shardft {

KOKKOS_INLINE_FUNCTION std::uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u = 0;
  __builtin_memcpy(&u, &f, sizeof u);
  return u;
#endif
}

KOKKOS_INLINE_FUNCTION float bits_to_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f = 0.f;
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
#endif
}

}  // namespace shardft
