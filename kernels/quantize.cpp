#include "kernels/quantize.hpp"

#include "kernels/device_traffic.hpp"
#include "kernels/math.hpp"

namespace shardft {

namespace {

// One block's scale, and whether the block holds a NaN or Inf.
KOKKOS_INLINE_FUNCTION float block_scale(const Unmanaged1<const float>& x, std::int64_t begin, std::int64_t end,
                                         float qmax, int& bad) {
  float amax = 0.f;
  for (std::int64_t i = begin; i < end; ++i) {
    const float v = x(i);
    if (!kmath::isfinite(v)) ++bad;
    const float a = v < 0 ? -v : v;
    amax = a > amax ? a : amax;
  }
  return amax / qmax;
}

// round(v / scale) half away from zero, clamped. Divides rather than multiplying by 1/scale (which
// overflows for blocks below ~1e-37) and rounds in double (in float, 0.49999997f + 0.5f is 1.0f).
KOKKOS_INLINE_FUNCTION int quantize_one(float v, float scale, int qmax) {
  if (!(scale > 0.f)) return 0;
  const double r = static_cast<double>(v) / static_cast<double>(scale);
  if (!(r >= -qmax - 1.0 && r <= qmax + 1.0)) return r > 0 ? qmax : (r < 0 ? -qmax : 0);  // NaN -> 0, no UB
  const int q = static_cast<int>(r < 0 ? r - 0.5 : r + 0.5);
  return q > qmax ? qmax : (q < -qmax ? -qmax : q);
}

// Block k of x: its scale into scales(k) and its int8 values into q; returns its non-finite count.
KOKKOS_INLINE_FUNCTION int int8_block(const Unmanaged1<const float>& x, int block, const Unmanaged1<std::int8_t>& q,
                                      const Unmanaged1<float>& scales, std::int64_t k) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t b = k * block, e = b + block < n ? b + block : n;
  int bad = 0;
  const float scale = block_scale(x, b, e, 127.f, bad);
  scales(k) = scale;
  for (std::int64_t i = b; i < e; ++i) q(i) = static_cast<std::int8_t>(quantize_one(x(i), scale, 127));
  return bad;
}

// Block k's int4 scale into scales(k); returns its non-finite count.
KOKKOS_INLINE_FUNCTION int int4_block_scale(const Unmanaged1<const float>& x, int block,
                                            const Unmanaged1<float>& scales, std::int64_t k) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t b = k * block, e = b + block < n ? b + block : n;
  int bad = 0;
  scales(k) = block_scale(x, b, e, 7.f, bad);
  return bad;
}

// Pairs in parallel: a byte's two nibbles may come from two blocks when the block size is odd.
void pack_int4(Unmanaged1<const float> x, int block, Unmanaged1<std::uint8_t> packed, Unmanaged1<float> scales) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  Kokkos::parallel_for(
      "quantize_int4_pack", Range(0, int4_bytes(n)), KOKKOS_LAMBDA(const std::int64_t j) {
        std::uint8_t byte = 0;
        for (int half = 0; half < 2; ++half) {
          const std::int64_t i = 2 * j + half;
          if (i >= n) break;
          const int q = quantize_one(x(i), scales(i / block), 7);
          byte = static_cast<std::uint8_t>(byte | ((static_cast<unsigned>(q) & 0xFu) << (4 * half)));
        }
        packed(j) = byte;
      });
}

}  // namespace

std::int64_t quantize_int8(Unmanaged1<const float> x, int block, Unmanaged1<std::int8_t> q, Unmanaged1<float> scales) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  std::int64_t bad_total = 0;
  Kokkos::parallel_reduce(
      "quantize_int8", Range(0, quant_blocks(n, block)),
      KOKKOS_LAMBDA(const std::int64_t k, std::int64_t& bad_sum) { bad_sum += int8_block(x, block, q, scales, k); },
      bad_total);
  count_host_sync("quantize_int8 non-finite count");
  return bad_total;
}

void quantize_int8(Unmanaged1<const float> x, int block, Unmanaged1<std::int8_t> q, Unmanaged1<float> scales,
                   Unmanaged1<double> nonfinite) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  Kokkos::parallel_for(
      "quantize_int8", Range(0, quant_blocks(n, block)), KOKKOS_LAMBDA(const std::int64_t k) {
        const int bad = int8_block(x, block, q, scales, k);
        if (bad > 0) Kokkos::atomic_add(&nonfinite(0), static_cast<double>(bad));
      });
}

void dequantize_int8(Unmanaged1<const std::int8_t> q, Unmanaged1<const float> scales, int block, Unmanaged1<float> x) {
  Kokkos::parallel_for(
      "dequantize_int8", Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { x(i) = static_cast<float>(q(i)) * scales(i / block); });
}

std::int64_t quantize_int4(Unmanaged1<const float> x, int block, Unmanaged1<std::uint8_t> packed,
                           Unmanaged1<float> scales) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  std::int64_t bad_total = 0;
  Kokkos::parallel_reduce(
      "quantize_int4_scales", Range(0, quant_blocks(n, block)),
      KOKKOS_LAMBDA(const std::int64_t k, std::int64_t& bad_sum) { bad_sum += int4_block_scale(x, block, scales, k); },
      bad_total);
  count_host_sync("quantize_int4 non-finite count");
  pack_int4(x, block, packed, scales);
  return bad_total;
}

void quantize_int4(Unmanaged1<const float> x, int block, Unmanaged1<std::uint8_t> packed, Unmanaged1<float> scales,
                   Unmanaged1<double> nonfinite) {
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  Kokkos::parallel_for(
      "quantize_int4_scales", Range(0, quant_blocks(n, block)), KOKKOS_LAMBDA(const std::int64_t k) {
        const int bad = int4_block_scale(x, block, scales, k);
        if (bad > 0) Kokkos::atomic_add(&nonfinite(0), static_cast<double>(bad));
      });
  pack_int4(x, block, packed, scales);
}

void dequantize_int4(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const float> scales, int block,
                     Unmanaged1<float> x, bool accumulate) {
  Kokkos::parallel_for(
      "dequantize_int4", Range(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) {
        const unsigned nib = (packed(i / 2) >> (4 * (i % 2))) & 0xFu;
        const int q = nib >= 8 ? static_cast<int>(nib) - 16 : static_cast<int>(nib);  // sign-extend 4 bits
        const float v = static_cast<float>(q) * scales(i / block);
        x(i) = accumulate ? x(i) + v : v;
      });
}

}  // namespace shardft
