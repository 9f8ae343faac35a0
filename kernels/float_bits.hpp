#pragma once
// The 32 bits of an fp32 value and back, in any kernel: the one bit copy bf16.hpp and fp16.hpp build their
// conversions on. On a GPU a register move (nvcc keeps a byte loop a byte loop: five integer
// instructions per copy); elsewhere a byte copy, which host compilers turn into one move and which
// needs nothing a device backend might lack.
#include <Kokkos_Core.hpp>
#include <cstdint>

namespace shardft {

KOKKOS_INLINE_FUNCTION std::uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u = 0;
  const unsigned char* s = reinterpret_cast<const unsigned char*>(&f);
  unsigned char* d = reinterpret_cast<unsigned char*>(&u);
  for (int i = 0; i < 4; ++i) d[i] = s[i];
  return u;
#endif
}

KOKKOS_INLINE_FUNCTION float bits_to_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f = 0.f;
  const unsigned char* s = reinterpret_cast<const unsigned char*>(&u);
  unsigned char* d = reinterpret_cast<unsigned char*>(&f);
  for (int i = 0; i < 4; ++i) d[i] = s[i];
  return f;
#endif
}

}  // namespace shardft
