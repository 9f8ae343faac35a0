#pragma once
// exp for SwiGLU's sigmoid (kernels/swiglu*.cpp), the one exp of those elementwise kernels.
//
// On the host, glibc's expf is a call per element, and a row loop with a call in it stays scalar: SwiGLU
// then cost about 3 ns per element on one core, a tenth of a small model's step. host_exp has no call
// and no branch, so the compiler vectorises the row loops (16 lanes with AVX-512):
//   x = k ln2 + r, k = round(x / ln2) (to nearest), |r| <= ln2 / 2 (ln2 in two floats: k ln2_hi is exact),
//   exp(r) = sum_{i<=7} r^i / i! (Horner; the truncation is below 6e-9 relative), 2^k from exponent bits.
// Within 2 ulp of the true exp over [-87, 88] (tests/unit/test_gate_exp.cpp). x is clamped to
// [-87, 88] first: exp(-87) and exp(88) stand for the tails, where the sigmoid 1 / (1 + exp(-x)) is
// 1 or 0 within a float's precision anyway; NaN stays NaN.
// On a GPU each kernel keeps the exp it had (a thread per element is already parallel).
#include <cstdint>
#include <cstring>

#include "kernels/math.hpp"

namespace shardft {

__attribute__((always_inline)) inline float host_exp(float x) {
  x = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);  // comparisons with NaN are false: NaN passes through
  // k = round(x / ln2) by adding 1.5 * 2^23, which leaves k in the low mantissa bits: no floor and no
  // float-to-int conversion, which the compiler will not vectorise while floating point may trap.
  const float shifted = x * 1.44269504088896341f + 12582912.f;
  const float k = shifted - 12582912.f;
  std::int32_t shifted_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof shifted_bits);
  const float r = (x - k * 0.693145751953125f) - k * 1.42860682030941723e-06f;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const std::int32_t bits = (shifted_bits - 0x4B400000 + 127) << 23;  // 0x4B400000: the bits of 1.5 * 2^23
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

namespace kmath {
// exp(x) in the fp32 SwiGLU kernels: host_exp on the host, the full-precision exp on a GPU.
KOKKOS_INLINE_FUNCTION float gate_exp(float x) {
#if defined(__CUDA_ARCH__)
  return exp(x);
#else
  return host_exp(x);
#endif
}
// In the bf16 SwiGLU kernels: host_exp on the host, the hardware approximation on a GPU (fast_exp).
KOKKOS_INLINE_FUNCTION float fast_gate_exp(float x) {
#if defined(__CUDA_ARCH__)
  return fast_exp(x);
#else
  return host_exp(x);
#endif
}
}  // namespace kmath

}  // namespace shardft
