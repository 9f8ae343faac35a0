#pragma once
// bfloat16 storage type: 1 sign, 8 exponent, 7 mantissa bits; the top half of an IEEE fp32.
// Usable on host and device. Arithmetic is always done in fp32: convert, compute, round back.
#include <Kokkos_Core.hpp>
#include <cstdint>
#include <cstring>
#include <type_traits>

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
    std::uint32_t u = float_bits(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    }
    const std::uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    return static_cast<std::uint16_t>(u >> 16);
#endif
  }
  KOKKOS_INLINE_FUNCTION static float to_float(std::uint16_t b) {
    const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
    float f;
    memcpy_bits(&f, &u);
    return f;
  }

 private:
  KOKKOS_INLINE_FUNCTION static std::uint32_t float_bits(float f) {
    std::uint32_t u;
    memcpy_bits(&u, &f);
    return u;
  }
  // A bit copy between 4-byte types. On a GPU a register move (nvcc keeps a byte loop a byte loop: five
  // integer instructions per conversion); on the host a byte copy, which the compiler turns into one move.
  template <class A, class B>
  KOKKOS_INLINE_FUNCTION static void memcpy_bits(A* dst, const B* src) {
    static_assert(sizeof(A) == 4 && sizeof(B) == 4, "bit copy of 4-byte types only");
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<A, float>) {
      *dst = __uint_as_float(*src);
    } else {
      *dst = __float_as_uint(*src);
    }
#else
    const unsigned char* s = reinterpret_cast<const unsigned char*>(src);
    unsigned char* d = reinterpret_cast<unsigned char*>(dst);
    for (unsigned i = 0; i < sizeof(A); ++i) d[i] = s[i];
#endif
  }
};

// The value an fp32 number has after a round trip through bf16.
KOKKOS_INLINE_FUNCTION float round_to_bf16(float f) { return bf16::to_float(bf16::round_bits(f)); }

}  // namespace shardft
