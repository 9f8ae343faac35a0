#pragma once
// Block-wise symmetric quantization for compressed communication (ZeRO++ qwZ and qgZ).
// x [n] is cut into blocks of `block` elements (the last one may be partial); block k has
//   scale_k = max_i |x_i| / qmax        (qmax = 127 for int8, 7 for int4; scale 0 for an all-zero block)
//   q_i     = round(x_i / scale_k)  in [-qmax, qmax]        x'_i = q_i * scale_k
// so |x_i - x'_i| <= scale_k / 2: half a quantization step. int4 packs two values per byte
// (element 2j in the low nibble, 2j+1 in the high one, two's complement).
// Non-finite inputs are never quantized: the kernels count them and callers report the error.
// Each quantizer comes in two forms: one returns the count to the host (a host sync per call), the
// other adds it into a device counter that its caller reads back later with other results (a training
// step's hot path: no sync).
#include <cstdint>

#include "kernels/types.hpp"

namespace shardft {

inline std::int64_t quant_blocks(std::int64_t n, int block) { return (n + block - 1) / block; }
inline std::int64_t int4_bytes(std::int64_t n) { return (n + 1) / 2; }

// Returns the number of non-finite inputs (or adds it into nonfinite(0)); q and scales are valid only
// when it is 0.
std::int64_t quantize_int8(Unmanaged1<const float> x, int block, Unmanaged1<std::int8_t> q, Unmanaged1<float> scales);
void quantize_int8(Unmanaged1<const float> x, int block, Unmanaged1<std::int8_t> q, Unmanaged1<float> scales,
                   Unmanaged1<double> nonfinite);
void dequantize_int8(Unmanaged1<const std::int8_t> q, Unmanaged1<const float> scales, int block, Unmanaged1<float> x);

std::int64_t quantize_int4(Unmanaged1<const float> x, int block, Unmanaged1<std::uint8_t> packed,
                           Unmanaged1<float> scales);
void quantize_int4(Unmanaged1<const float> x, int block, Unmanaged1<std::uint8_t> packed, Unmanaged1<float> scales,
                   Unmanaged1<double> nonfinite);
// x[i] (+)= dequantized value: accumulate = true adds (the reduction of qgZ), false overwrites.
void dequantize_int4(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const float> scales, int block,
                     Unmanaged1<float> x, bool accumulate);

}  // namespace shardft
