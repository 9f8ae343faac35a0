// Cross-entropy's rows on AVX-512 (kernels/avx512_cross_entropy.hpp). The generic host kernels call libm's
// expf once per logit in the log-sum-exp and once again in the gradient, scalar: here both passes run 16
// logits per step.
#include <cmath>
#include <limits>

#include "kernels/avx512_cross_entropy.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/cpu/avx512_exp.hpp"
#include "kernels/cpu/avx512_rows.hpp"

namespace shardft::avx512 {

namespace {

// The 16 lanes' sum and max, lane by lane (GCC 12's _mm512_reduce_* warn inside its own headers).
SHARDFT_AVX512_ROWS_TARGET float lanes_sum(__m512 v) {
  alignas(64) float x[16];
  _mm512_store_ps(x, v);
  float s = 0.f;
  for (const float e : x) s += e;
  return s;
}
SHARDFT_AVX512_ROWS_TARGET float lanes_max(__m512 v) {
  alignas(64) float x[16];
  _mm512_store_ps(x, v);
  float m = x[0];
  for (const float e : x) m = e > m ? e : m;
  return m;
}

template <class T>
SHARDFT_AVX512_ROWS_TARGET float logsumexp(const T* z, std::int64_t n) {
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  over_row(n, [&](std::int64_t j, __mmask16 m) SHARDFT_AVX512_ROWS_TARGET {
    mx = _mm512_mask_max_ps(mx, m, mx, load(z + j, m));
  });
  const float row_max = lanes_max(mx);
  const __m512 shift = _mm512_set1_ps(row_max);
  __m512 sum = _mm512_setzero_ps();
  over_row(n, [&](std::int64_t j, __mmask16 m) SHARDFT_AVX512_ROWS_TARGET {
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, exp_ps(_mm512_sub_ps(load(z + j, m), shift))));
  });
  return row_max + std::log(lanes_sum(sum));
}

template <class T>
SHARDFT_AVX512_ROWS_TARGET void softmax_gradient(T* z, std::int64_t n, float lse, std::int64_t target,
                                                 float grad_scale) {
  const __m512 shift = _mm512_set1_ps(lse), scale = _mm512_set1_ps(grad_scale);
  over_row(n, [&](std::int64_t j, __mmask16 m) SHARDFT_AVX512_ROWS_TARGET {
    __m512 g = _mm512_mul_ps(scale, exp_ps(_mm512_sub_ps(load(z + j, m), shift)));
    if (target >= j && target < j + 16) g = _mm512_mask_sub_ps(g, __mmask16(1u << (target - j)), g, scale);
    store(z + j, m, g);
  });
}

}  // namespace

bool cross_entropy_fits() {
  static const bool fits = [] {  // CPUID once (a VM traps every CPUID to the hypervisor)
    const CpuFeatures f = host_cpu_features();
    return f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16;
  }();
  return fits;
}

float row_logsumexp(const float* z, std::int64_t n) { return logsumexp(z, n); }
float row_logsumexp(const std::uint16_t* z, std::int64_t n) { return logsumexp(z, n); }
void row_softmax_gradient(float* z, std::int64_t n, float lse, std::int64_t target, float grad_scale) {
  softmax_gradient(z, n, lse, target, grad_scale);
}
void row_softmax_gradient(std::uint16_t* z, std::int64_t n, float lse, std::int64_t target, float grad_scale) {
  softmax_gradient(z, n, lse, target, grad_scale);
}

}  // namespace shardft::avx512
