// SwiGLU's rows on AVX-512 (kernels/avx512_swiglu.hpp). The generic host loops (kernels/swiglu*.cpp) are
// bound by their instruction count, not by memory: GCC's vectorised exp keeps its NaN-safe clamps and
// exponent arithmetic as masked blends and integer ops, a rounding to bf16 costs ten integer ops, and
// every 512-bit op issues on the same two ports. Here the exp is kernels/cpu/avx512_exp.hpp's (2^k one
// scalef), the rounding one vcvtneps2bf16, and one division makes both sig and silu.
#include <immintrin.h>

#include "kernels/avx512_swiglu.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/cpu/avx512_exp.hpp"
#include "kernels/cpu/avx512_rows.hpp"

#define SHARDFT_AVX512_SWIGLU_TARGET SHARDFT_AVX512_ROWS_TARGET

namespace shardft::avx512 {

namespace {

// sig = 1 / (1 + e^-x) on 16 lanes (NaN stays NaN: e^-x is 0 for it, and g carries it into every output).
SHARDFT_AVX512_SWIGLU_TARGET inline __m512 sigmoid(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

struct Backward {
  __m512 s, du, dg;
};
SHARDFT_AVX512_SWIGLU_TARGET inline Backward backward(__m512 g, __m512 u, __m512 ds) {
  const __m512 sig = sigmoid(g), silu = _mm512_mul_ps(g, sig), one = _mm512_set1_ps(1.f);
  const __m512 slope = _mm512_fmadd_ps(g, _mm512_sub_ps(one, sig), one);  // 1 + g (1 - sig)
  return {_mm512_mul_ps(silu, u), _mm512_mul_ps(ds, silu), _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(ds, u), sig), slope)};
}

template <class T>
SHARDFT_AVX512_SWIGLU_TARGET void forward_row(const T* g, const T* u, T* s, std::int64_t n) {
  over_row(n, [&](std::int64_t j, __mmask16 m) SHARDFT_AVX512_SWIGLU_TARGET {
    const __m512 x = load(g + j, m);
    store(s + j, m, _mm512_mul_ps(_mm512_mul_ps(x, sigmoid(x)), load(u + j, m)));
  });
}

template <class T>
SHARDFT_AVX512_SWIGLU_TARGET void backward_row(const T* g, const T* u, const T* ds, T* dg, T* du, T* s,
                                               std::int64_t n) {
  over_row(n, [&](std::int64_t j, __mmask16 m) SHARDFT_AVX512_SWIGLU_TARGET {
    const Backward b = backward(load(g + j, m), load(u + j, m), load(ds + j, m));
    if (s != nullptr) store(s + j, m, b.s);
    store(du + j, m, b.du);
    store(dg + j, m, b.dg);
  });
}

}  // namespace

bool swiglu_fits() {
  static const bool fits = [] {  // CPUID once (asked per kernel call; in a VM each CPUID traps)
    const CpuFeatures f = host_cpu_features();
    return f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16;
  }();
  return fits;
}

void swiglu_forward_row(const float* g, const float* u, float* s, std::int64_t n) { forward_row(g, u, s, n); }
void swiglu_backward_row(const float* g, const float* u, const float* ds, float* dg, float* du, std::int64_t n) {
  backward_row<float>(g, u, ds, dg, du, nullptr, n);
}
void swiglu_forward_row_bf16(const std::uint16_t* g, const std::uint16_t* u, std::uint16_t* s, std::int64_t n) {
  forward_row(g, u, s, n);
}
void swiglu_backward_row_bf16(const std::uint16_t* g, const std::uint16_t* u, const std::uint16_t* ds,
                              std::uint16_t* dg, std::uint16_t* du, std::uint16_t* s, std::int64_t n) {
  backward_row(g, u, ds, dg, du, s, n);
}

}  // namespace shardft::avx512
