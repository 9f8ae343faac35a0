#pragma once
// Softmax cross-entropy's rows on the host's AVX-512 (kernels/cross_entropy.hpp's formulas, 16 logits per
// step): the host path of the fp32 and the bf16 kernels where the CPU has AVX-512F, BW, VL and BF16. Both
// dtypes run the same loops, so a bf16 row's loss is its widening's and its gradient the fp32 one rounded
// once. exp is kernels/cpu/avx512_exp.hpp's (about 2e-7 relative; 0 below e^-87, where a softmax term is
// below a float's resolution of the row's sum anyway); a row's sum of exponentials is kept in 16 lanes and
// added across them at the end.
#include <cstdint>

namespace shardft::avx512 {

// Whether these rows run here (the build has them, the CPU has AVX-512F, BW, VL and BF16).
bool cross_entropy_fits();

// log sum_v exp(z[v]) over a row of n logits (bf16 ones as their bits).
float row_logsumexp(const float* z, std::int64_t n);
float row_logsumexp(const std::uint16_t* z, std::int64_t n);

// In place: z[v] = grad_scale * exp(z[v] - lse), then minus grad_scale at `target` (not
// grad_scale * (p - 1): the generic kernels' roundings).
void row_softmax_gradient(float* z, std::int64_t n, float lse, std::int64_t target, float grad_scale);
void row_softmax_gradient(std::uint16_t* z, std::int64_t n, float lse, std::int64_t target, float grad_scale);

}  // namespace shardft::avx512
