#pragma once
// IEEE 754 binary16 (fp16, "half"): 1 sign, 5 exponent, 10 mantissa bits; largest finite 65504,
// smallest normal 2^-14, smallest subnormal 2^-24. fp16 compute is emulated as bf16 is: values are
// rounded to fp16 and held in fp32 buffers (every fp16 value is exact in fp32), GEMMs accumulate in fp32.
// Usable on host and device.
#include <Kokkos_Core.hpp>
#include <cstdint>

#include "kernels/float_bits.hpp"
#include "kernels/types.hpp"

namespace shardft {

struct fp16_bits {
  // fp32 -> fp16 bits, round to nearest even. |f| >= 65520 (halfway between 65504 and 2^16, which ties to
  // the even 2^16) becomes +-inf; below 2^-14 the result is subnormal (multiples of 2^-24), below 2^-25
  // it is +-0. NaN stays a quiet NaN.
  KOKKOS_INLINE_FUNCTION static std::uint16_t from_float(float f) {
    const std::uint32_t u = float_to_bits(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520, inf included
    if (a >= 0x38800000u) {  // >= 2^-14: normal; rebias the exponent (127 -> 15), drop 13 mantissa bits
      std::uint32_t r = a - 0x38000000u;
      r += 0xfffu + ((r >> 13) & 1u);  // a carry into the exponent is the correct next binade
      return static_cast<std::uint16_t>(sign | (r >> 13));
    }
    const std::uint32_t e = a >> 23;
    if (e < 102) return static_cast<std::uint16_t>(sign);  // below 2^-25: rounds to zero
    // Subnormal: value = m 2^(e-150) with the implicit bit; in units of 2^-24 that is m >> (126 - e).
    const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - e;  // 14 .. 24
    std::uint32_t q = m >> shift;
    const std::uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;  // 0x400 on a carry: the smallest normal
    return static_cast<std::uint16_t>(sign | q);
  }
  KOKKOS_INLINE_FUNCTION static float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    std::uint32_t u;
    if (exp == 0) {
      const float v = static_cast<float>(man) * 5.9604644775390625e-8f;  // man * 2^-24, exact
      return sign ? -v : v;
    }
    if (exp == 31) {
      u = sign | 0x7f800000u | (man << 13);
    } else {
      u = sign | ((exp + 112u) << 23) | (man << 13);
    }
    return bits_to_float(u);
  }
};

// The value an fp32 number has after a round trip through fp16.
KOKKOS_INLINE_FUNCTION float round_to_fp16(float f) { return fp16_bits::to_float(fp16_bits::from_float(f)); }

// dst[i] = fp16(src[i]) as fp32 (dst may be src): what an fp16 copy of src holds.
void round_to_fp16(Unmanaged1<const float> src, Unmanaged1<float> dst);

}  // namespace shardft
