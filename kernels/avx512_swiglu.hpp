#pragma once
// SwiGLU's rows on the host's AVX-512 (kernels/swiglu.hpp's formulas, 16 columns per step): the host path of
// the fp32 and the bf16 SwiGLU kernels where the CPU has AVX-512F, BW, VL and BF16. Both dtypes run the same
// vector expressions, so a bf16 output is the fp32 one rounded once (vcvtneps2bf16: round to nearest even,
// like bf16::round_bits; an fp32 subnormal result becomes a signed zero):
//   sig = 1 / (1 + exp(-g)),  silu = g sig
//   forward:   s = silu u
//   backward:  du = ds silu;  dg = ds u sig (1 + g (1 - sig))
// exp is kernels/cpu/avx512_exp.hpp's (about 2e-7 relative; 0 below e^-87, so sig is 1 there; a NaN g
// gives NaN outputs). Each step reads all of its 16 columns' inputs before it writes an output, so
// dg and du may be g and u, and s may be ds.
#include <cstdint>

namespace shardft::avx512 {

// Whether these rows run here (the build has them, the CPU has AVX-512F, BW, VL and BF16).
bool swiglu_fits();

void swiglu_forward_row(const float* g, const float* u, float* s, std::int64_t n);
void swiglu_backward_row(const float* g, const float* u, const float* ds, float* dg, float* du, std::int64_t n);

// bf16 values as their bits. The backward also writes s again (kernels/swiglu_bf16.hpp).
void swiglu_forward_row_bf16(const std::uint16_t* g, const std::uint16_t* u, std::uint16_t* s, std::int64_t n);
void swiglu_backward_row_bf16(const std::uint16_t* g, const std::uint16_t* u, const std::uint16_t* ds,
                              std::uint16_t* dg, std::uint16_t* du, std::uint16_t* s, std::int64_t n);

}  // namespace shardft::avx512
