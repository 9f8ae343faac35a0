#pragma once
// NF4 4-bit quantization of frozen weights (QLoRA), stored exactly as bitsandbytes stores
// quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=True) on its CUDA kernels.
//
// x [n] (a weight flattened row-major) is cut into blocks of 64 (the last one may be partial):
//   absmax_k = max_i |x_i| over block k                                    (fp32, k < B = ceil(n/64))
//   idx_i    = dQuantizeNF4(x_i * (1 / absmax_k)): the index of the nearest of the 16 NF4 values,
//              a value exactly on a midpoint goes to the lower index; an all-zero block gives 0
//   packed_j = idx_{2j} << 4 | idx_{2j+1}    (high nibble first; odd n pads with idx(0) = 7)
// Double quantization of the absmax (bitsandbytes' "nested" state2):
//   offset   = mean_k absmax_k                                              (fp32 scalar)
//   a_k      = absmax_k - offset, cut into blocks of 256
//   absmax2_m = max |a_k| over block m                                       (fp32, ceil(B/256))
//   absmax_q_k = dQuantize(a_k * (1 / absmax2_m)): the 8-bit index into the signed dynamic map
//                (create_dynamic_map(signed=True), 256 sorted values in [-0.993, 1])
// Dequantize, in this order of fp32 roundings (so results equal bitsandbytes' bit for bit):
//   scale_k = fp32(dynamic[absmax_q_k] * absmax2_{k/256}) + offset
//   y_i     = nf4[idx_i] * scale_k               (bf16 output: y_i rounded to nearest even)
// Storage: ceil(n/2) + B + 4 ceil(B/256) + 4 bytes, about 0.5159 bytes per parameter.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

constexpr int kNf4Block = 64;         // values per absmax
constexpr int kNf4AbsmaxBlock = 256;  // absmax per second-level scale

inline std::int64_t nf4_packed_bytes(std::int64_t n) { return (n + 1) / 2; }
inline std::int64_t nf4_blocks(std::int64_t n) { return (n + kNf4Block - 1) / kNf4Block; }
inline std::int64_t nf4_absmax_blocks(std::int64_t n) { return (nf4_blocks(n) + kNf4AbsmaxBlock - 1) / kNf4AbsmaxBlock; }
// Bytes a quantized tensor of n values occupies: packed indices, 8-bit absmax, fp32 absmax2, offset.
inline std::int64_t nf4_storage_bytes(std::int64_t n) {
  return nf4_packed_bytes(n) + nf4_blocks(n) + 4 * nf4_absmax_blocks(n) + 4;
}

// The 16 NF4 values (QLoRA paper; bitsandbytes get_4bit_type("nf4")), index order.
const std::array<float, 16>& nf4_code();
// bitsandbytes' create_dynamic_map(signed=True): 256 sorted fp32 values, computed as torch does.
const std::array<float, 256>& dynamic_map_signed();

// A quantized tensor. Its arrays live in MemSpace; offset is a host scalar.
struct Nf4Tensor {
  std::vector<std::int64_t> shape;
  std::int64_t numel = 0;
  int blocksize = kNf4Block;
  int blocksize2 = kNf4AbsmaxBlock;
  View1<std::uint8_t> packed;    // [nf4_packed_bytes(numel)]
  View1<std::uint8_t> absmax_q;  // [nf4_blocks(numel)]
  View1<float> absmax2;          // [nf4_absmax_blocks(numel)]
  float offset = 0.f;
  std::int64_t storage_bytes() const { return nf4_storage_bytes(numel); }
};

// Quantizes src (numel = product of shape). Throws std::invalid_argument naming `name` when src
// holds NaN or Inf, or when shape does not match src.
Nf4Tensor nf4_quantize(Unmanaged1<const float> src, std::vector<std::int64_t> shape, const std::string& name);

// dst [numel] = the dequantized values. dst.extent(0) must equal q.numel.
void nf4_dequantize(const Nf4Tensor& q, Unmanaged1<float> dst);
void nf4_dequantize(const Nf4Tensor& q, Unmanaged1<bf16> dst);
// The same over the raw arrays (e.g. a gathered flat buffer); n = dst.extent(0).
void nf4_dequantize(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const std::uint8_t> absmax_q,
                    Unmanaged1<const float> absmax2, float offset, Unmanaged1<float> dst);
void nf4_dequantize(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const std::uint8_t> absmax_q,
                    Unmanaged1<const float> absmax2, float offset, Unmanaged1<bf16> dst);

// The two levels of nf4_quantize, for tests and for callers that build the state themselves.
// First level: per-64-block absmax and packed indices; returns the count of non-finite inputs.
std::int64_t nf4_quantize_blocks(Unmanaged1<const float> src, Unmanaged1<std::uint8_t> packed,
                                 Unmanaged1<float> absmax);
// The mean of absmax, summed in double and rounded once (torch's fp32 mean may differ by an ulp).
float nf4_absmax_offset(Unmanaged1<const float> absmax);
// Second level: absmax_q and absmax2 of (absmax - offset), blocks of 256.
void nf4_quantize_absmax(Unmanaged1<const float> absmax, float offset, Unmanaged1<std::uint8_t> absmax_q,
                         Unmanaged1<float> absmax2);

}  // namespace shardft
