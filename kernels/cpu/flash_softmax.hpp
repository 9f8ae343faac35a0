#pragma once
// The softmax side of the CPU's fused causal attention kernels (kernels/cpu/amx_attention_bf16.cpp, bf16
// operands on AMX tiles; kernels/cpu/avx512_attention_fp32.cpp, fp32 operands on AVX-512 FMAs), which
// share FlashAttention-2's loop and tile layout: tiles of 64 queries x 64 keys of fp32 scores held
// transposed, St [64 keys][64 queries], so that every per-query step (max, exp, sums, rescale) runs along
// contiguous rows and vectorises without reductions. Where P and dS go is the kernel's: a store policy
// `store(at, p)` takes 16 values for St[at .. at + 15] (fp32 in place, or bf16 for the tiles).
//
// The including file defines SHARDFT_FLASH_TARGET (its kernels' target attribute) first: everything here
// is compiled for that instruction set, in the file's own unnamed namespace, so that these helpers inline
// into its kernels and the bf16 kernel's copies (AVX-512 BF16) never stand in for the fp32 kernel's.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/avx512_exp.hpp"
#include "kernels/seq_ranges.hpp"

#ifndef SHARDFT_FLASH_TARGET
#error "define SHARDFT_FLASH_TARGET (the including kernels' target attribute) before this header"
#endif

namespace shardft {
namespace {
namespace flash {

using avx512::exp_ps;

constexpr int kTile = 64;  // queries and keys per tile
constexpr float kInf = std::numeric_limits<float>::infinity();

inline int padded(int n) { return (n + kTile - 1) / kTile * kTile; }

// `n` floats of `buffer` (grown as needed, kept for the next call) from its first 64-byte line.
inline float* aligned_floats(std::vector<float>& buffer, std::size_t n) {
  buffer.resize(n + 16);
  return reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) & ~std::uintptr_t{63});
}

// Whether the queries and keys all belong to one sample.
inline bool one_sample(SeqRange qr, SeqRange kr) { return qr.lo == qr.hi && kr.lo == kr.hi && qr.lo == kr.lo; }
// Whether every key of tile j0 is visible from every real query of tile i0 (no mask needed).
inline bool fully_visible(int i0, int j0, SeqRange qr, SeqRange kr) {
  return j0 + kTile - 1 <= i0 && one_sample(qr, kr);
}

// St[c][r] = -inf where key j = j0 + c is not visible from query i = i0 + r: queries before the key and
// past the sequence's end see none of it (a prefix and a suffix of the row), and within the rest only
// queries of the key's sample see it (checked where the tiles hold more than one sample).
inline void mask(float* St, int j0, int i0, int T, const std::int32_t* sid, bool one_sample) {
  const int end = std::clamp(T - i0, 0, kTile);
  for (int c = 0; c < kTile; ++c) {
    const int j = j0 + c, begin = std::clamp(j - i0, 0, end);
    float* row = St + c * kTile;
    std::fill(row, row + begin, -kInf);
    std::fill(row + end, row + kTile, -kInf);
    if (one_sample || begin == end) continue;
    const std::int32_t sj = sid[j];  // j <= i0 + begin < T
    const std::int32_t* si = sid + i0;
    for (int r = begin; r < end; ++r) row[r] = si[r] != sj ? -kInf : row[r];
  }
}

// The forward's online softmax over one query tile, a column per query, with each query's running max m
// and sum l, 16 queries to a register.
struct OnlineSoftmax {
  alignas(64) float m[kTile], l[kTile], corr[kTile];

  void start() {
    std::fill_n(m, kTile, -kInf);
    std::fill_n(l, kTile, 0.f);
  }
  // St (raw products; keys not visible masked where the tile is not fully visible) -> P = exp(scale St -
  // m') into `store`; the running max and sum move to this tile, corr[r] the factor the row of O so far
  // takes. The sums take P before any rounding of the store.
  template <class Store>
  SHARDFT_FLASH_TARGET void tile(const float* St, float scale, Store store) {
    const __m512 vs = _mm512_set1_ps(scale), none = _mm512_set1_ps(-kInf);
    for (int r = 0; r < kTile; r += 16) {
      __m512 mx = none;
      for (int c = 0; c < kTile; ++c) mx = _mm512_max_ps(mx, _mm512_load_ps(St + c * kTile + r));
      const __m512 m_old = _mm512_load_ps(m + r);
      const __m512 m_new = _mm512_max_ps(m_old, _mm512_mul_ps(vs, mx));  // scale > 0: the max of the scaled
      // nothing visible yet (m_new = -inf): shift 0, so P = 0 and corr = 0
      const __m512 shift = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m_new, none, _CMP_EQ_OQ), m_new,
                                                _mm512_setzero_ps());
      __m512 sum = _mm512_setzero_ps();
      for (int c = 0; c < kTile; ++c) {
        const __m512 p = exp_ps(_mm512_fmsub_ps(vs, _mm512_load_ps(St + c * kTile + r), shift));
        sum = _mm512_add_ps(sum, p);
        store(c * kTile + r, p);
      }
      const __m512 cr = exp_ps(_mm512_sub_ps(m_old, shift));
      _mm512_store_ps(corr + r, cr);
      _mm512_store_ps(l + r, _mm512_fmadd_ps(_mm512_load_ps(l + r), cr, sum));
      _mm512_store_ps(m + r, m_new);
    }
  }
};

// Backward: P = exp(scale St - lse) from St (raw products, masked), one lse per query (column).
template <class Store>
SHARDFT_FLASH_TARGET void probabilities(const float* St, float scale, const float* lse, Store store) {
  const __m512 vs = _mm512_set1_ps(scale);
  for (int r = 0; r < kTile; r += 16) {
    const __m512 l = _mm512_loadu_ps(lse + r);
    for (int c = 0; c < kTile; ++c) {
      store(c * kTile + r, exp_ps(_mm512_fmsub_ps(vs, _mm512_load_ps(St + c * kTile + r), l)));
    }
  }
}

// dS = P (dP - D), one D per query (column).
template <class Store>
SHARDFT_FLASH_TARGET void score_gradients(const float* Pt, const float* dPt, const float* D, Store store) {
  for (int r = 0; r < kTile; r += 16) {
    const __m512 d = _mm512_loadu_ps(D + r);
    for (int c = 0; c < kTile; ++c) {
      const int at = c * kTile + r;
      store(at, _mm512_mul_ps(_mm512_load_ps(Pt + at), _mm512_sub_ps(_mm512_load_ps(dPt + at), d)));
    }
  }
}

// The fp32 store: 16 values in place.
struct StoreFloats {
  float* to;
  SHARDFT_FLASH_TARGET void operator()(int at, __m512 v) const { _mm512_store_ps(to + at, v); }
};

}  // namespace flash
}  // namespace
}  // namespace shardft
