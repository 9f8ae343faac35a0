#pragma once
// e^x on 16 lanes of AVX-512F, shared by the host's AVX-512 kernels (kernels/cpu/flash_softmax.hpp's
// attention, kernels/cpu/avx512_swiglu.cpp). Only code that runs on a CPU with AVX-512F may call it; its
// callers target a superset, so it inlines into them.
#include <immintrin.h>

#define SHARDFT_AVX512_EXP_TARGET __attribute__((target("avx512f")))

namespace shardft::avx512 {

// e^x on 16 lanes: x = n ln2 + r (n = round(x / ln2), ln2 in two parts so n ln2 is exact, |r| <= ln2 / 2),
// e^r by its Taylor series to r^6 (relative error about 2e-7), times 2^n by scalef. Below -87 (a masked
// score's -inf included) the result is 0: e^x would be a denormal there, which costs the CPU a microcode
// assist per lane to produce (and which the bf16 conversion and TDPBF16PS read as 0 anyway).
SHARDFT_AVX512_EXP_TARGET inline __m512 exp_ps(__m512 x) {
  const __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.f), _CMP_GE_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.f)), _mm512_set1_ps(88.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-06f), r);
  __m512 p = _mm512_set1_ps(1.f / 720.f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  return _mm512_maskz_mov_ps(normal, _mm512_scalef_ps(p, n));
}

}  // namespace shardft::avx512
