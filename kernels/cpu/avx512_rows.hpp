#pragma once
// Rows of fp32 or bf16 values on AVX-512, 16 lanes per step, for the host's elementwise AVX-512 kernels
// (kernels/cpu/avx512_swiglu.cpp): bf16 read by widening
// and written with vcvtneps2bf16 (round to nearest even; an fp32 subnormal becomes a signed zero), so a
// kernel's bf16 outputs are its fp32 ones rounded once. Only code that runs on a CPU with AVX-512F, BW and
// BF16 may call these.
#include <immintrin.h>

#include <cstdint>

#define SHARDFT_AVX512_ROWS_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace shardft::avx512 {

// The last step of a row of n: its lanes as a mask (n % 16 of them, or all).
inline __mmask16 last_lanes(std::int64_t n) {
  return n % 16 == 0 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n % 16)) - 1);
}

SHARDFT_AVX512_ROWS_TARGET inline __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
SHARDFT_AVX512_ROWS_TARGET inline void store(float* p, __mmask16 m, __m512 v) { _mm512_mask_storeu_ps(p, m, v); }
SHARDFT_AVX512_ROWS_TARGET inline __m512 load(const std::uint16_t* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}
SHARDFT_AVX512_ROWS_TARGET inline void store(std::uint16_t* p, __mmask16 m, __m512 v) {
  _mm256_mask_storeu_epi16(p, m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

// step(j, mask) over a row of n in steps of 16: every full step with a constant mask (the compiler drops
// it), then the row's last, partial step.
template <class Step>
SHARDFT_AVX512_ROWS_TARGET inline void over_row(std::int64_t n, const Step& step) {
  std::int64_t j = 0;
  for (; j + 16 <= n; j += 16) step(j, __mmask16(0xffff));
  if (j < n) step(j, last_lanes(n));
}

}  // namespace shardft::avx512
