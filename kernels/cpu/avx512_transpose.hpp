#pragma once
// A 16 x 16 transpose of 32-bit words in AVX-512F registers, shared by the CPU kernels that pack operands
// (kernels/cpu/amx_tiles.hpp, kernels/cpu/avx512_attention_fp32.cpp). Only code that runs on a CPU with
// AVX-512F may call it; the kernels that include it target a superset, so it inlines into them.
#include <immintrin.h>

#define SHARDFT_AVX512F_TARGET __attribute__((target("avx512f")))

namespace shardft::avx512 {

// One round of transpose_words: the off-diagonal b x b blocks of every 2b x 2b block swapped.
SHARDFT_AVX512F_TARGET inline void transpose_round(__m512i r[16], int b, __m512i lo, __m512i hi) {
  for (int i = 0; i < 16; ++i) {
    if (i & b) continue;
    const __m512i x = r[i], y = r[i + b];
    r[i] = _mm512_permutex2var_epi32(x, lo, y);
    r[i + b] = _mm512_permutex2var_epi32(x, hi, y);
  }
}

// A 16 x 16 matrix of 32-bit words, one row per register, transposed in place: rounds for b = 8, 4, 2, 1.
SHARDFT_AVX512F_TARGET inline void transpose_words(__m512i r[16]) {
  // lo: row i keeps its columns without bit b and takes row i + b's; hi: row i + b takes row i's columns
  // with bit b and keeps its own.
  transpose_round(r, 8, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23),
                  _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31));
  transpose_round(r, 4, _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27),
                  _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31));
  transpose_round(r, 2, _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
                  _mm512_setr_epi32(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31));
  transpose_round(r, 1, _mm512_setr_epi32(0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30),
                  _mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31));
}

}  // namespace shardft::avx512
