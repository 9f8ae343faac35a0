#pragma once
// bfloat16 storage type: 1 sign, 8 exponent, 7 mantissa bits; the top half of an IEEE fp32.
// Usable on host and device. Arithmetic is always done in fp32: convert, compute, round back.
#include <Kokkos_Core.hpp>
#include <cstdint>

#include "kernels/float_bits.hpp"

namespace shardft {

struct bf16 {
  std::uint16_t bits = 0;

  bf16() = default;  // defaulted: host and device alike (nvcc ignores annotations on it)
  KOKKOS_INLINE_FUNCTION explicit bf16(float f) : bits(round_bits(f)) {}
  KOKKOS_INLINE_FUNCTION explicit operator float() const { return to_float(bits); }

  // fp32 -> bf16 with round-to-nearest-even; NaN stays a (quiet) NaN.
  KOKKOS_INLINE_FUNCTION static std::uint16_t round_bits(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    // The hardware conversion (sm_80+): the same rounding in one instruction instead of ten integer
    // ones, which matters where an elementwise kernel rounds every value it writes. A NaN comes back as
    // the canonical quiet NaN rather than with its payload kept.
    std::uint16_t out;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(out) : "f"(f));
    return out;
#else
    // Both results, then a select: no branch, so host loops that round every element vectorise.
    const std::uint32_t u = float_to_bits(f);
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const std::uint32_t quiet_nan = (u >> 16) | 0x0040u;
    return static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
#endif
  }
  KOKKOS_INLINE_FUNCTION static float to_float(std::uint16_t b) {
    return bits_to_float(static_cast<std::uint32_t>(b) << 16);
  }
};

// The value an fp32 number has after a round trip through bf16.
KOKKOS_INLINE_FUNCTION float round_to_bf16(float f) { return bf16::to_float(bf16::round_bits(f)); }

// A row's address as the host's intrinsics kernels take it (kernels/cpu/): fp32 as it is, bf16 as its bits.
inline const float* raw_elements(const float* p) { return p; }
inline float* raw_elements(float* p) { return p; }
inline const std::uint16_t* raw_elements(const bf16* p) { return &p->bits; }
inline std::uint16_t* raw_elements(bf16* p) { return &p->bits; }

}  // namespace shardft
