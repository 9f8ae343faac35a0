#pragma once
// The AMX tile layouts and packing shared by the CPU's AMX kernels (kernels/cpu/amx_*.cpp, compiled with
// -mamx-tile -mamx-bf16): tiles of 16 rows x 64 bytes, op(A) packed into row pairs of two 16 x 32 tiles per
// step of 32 along K, op(B) into column pairs of two VNNI tiles per step, both zero-padded to multiples of
// 32. Only code that runs after amx::available() may call these.
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/avx512_transpose.hpp"

// The hot functions use AVX-512 as well: every CPU with AMX has it, and only such a CPU runs them. The
// rest of a file (available(), describe()) stays at the build's instruction set.
#define SHARDFT_AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,amx-tile,amx-bf16")))

namespace shardft::amx::tiles {

using avx512::transpose_words;

constexpr int kTileElements = 512;  // 16 rows x 64 bytes of bf16

struct TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

SHARDFT_AMX_TARGET inline void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = 16;
    cfg.bytes_per_row[t] = 64;
  }
  _tile_loadconfig(&cfg);
}

// `elements` bf16 slots in `buffer` (grown as needed, kept for the next call) from its first 64-byte line.
inline std::uint16_t* cache_aligned(std::vector<std::uint16_t>& buffer, std::size_t elements) {
  buffer.resize(elements + 32);
  const auto at = (reinterpret_cast<std::uintptr_t>(buffer.data()) + 63) & ~std::uintptr_t{63};
  return reinterpret_cast<std::uint16_t*>(at);
}

// The first `count` of 32 bf16 slots as a mask (count may be <= 0 or >= 32).
inline __mmask32 first_slots(int count) {
  return count >= 32 ? ~__mmask32{0} : count <= 0 ? __mmask32{0} : static_cast<__mmask32>((1u << count) - 1);
}

// Rows kk and kk + 1 of x (row-major, stride ld; rows from k on read as zero), the 16 columns from j0 that
// `cols` selects, as 16 words (x[kk][j], x[kk + 1][j]): a row of a VNNI tile, or of a tile before its transpose.
SHARDFT_AMX_TARGET inline __m512i row_pair_words(const std::uint16_t* x, int ld, int k, int kk, int j0,
                                                 __mmask16 cols) {
  const __m256i lo = kk < k ? _mm256_maskz_loadu_epi16(cols, x + static_cast<std::size_t>(kk) * ld + j0)
                            : _mm256_setzero_si256();
  const __m256i hi = kk + 1 < k ? _mm256_maskz_loadu_epi16(cols, x + static_cast<std::size_t>(kk + 1) * ld + j0)
                                : _mm256_setzero_si256();
  return _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
}

// Which of 16 columns from j0 lie before n.
inline __mmask16 columns_before(int n, int j0) {
  return static_cast<__mmask16>(n - j0 >= 16 ? 0xffff : n - j0 <= 0 ? 0 : (1u << (n - j0)) - 1);
}

// One row pair of op(A)[m, k] (rows i0 .. i0 + 31; row-major a with stride lda, trans: a is [k, m]) as
// `chunks` steps of two 16 x 32 tiles: out[(c * 2 + h) * 512 + r * 32 + e] = op(A)[i0 + 16 h + r][32 c + e],
// zero past m and k.
SHARDFT_AMX_TARGET inline void pack_a_strip(bool trans, const std::uint16_t* a, int lda, int m, int k, int i0, int c0,
                                     int chunks, std::uint16_t* out) {
  if (!trans) {
    for (int r = 0; r < 32; ++r) {
      const int i = i0 + r;
      std::uint16_t* dst = out + (r / 16) * kTileElements + (r % 16) * 32;
      const std::uint16_t* src = a + static_cast<std::size_t>(i) * lda;
      for (int c = 0; c < chunks; ++c) {
        const int kk = 32 * (c0 + c);
        const __m512i v = i < m ? _mm512_maskz_loadu_epi16(first_slots(k - kk), src + kk) : _mm512_setzero_si512();
        _mm512_store_si512(dst + static_cast<std::size_t>(c) * 2 * kTileElements, v);
      }
    }
    return;
  }
  // a's rows are K: rows kk, kk + 1 of 16 columns make 16 words (a[kk][i], a[kk + 1][i]); 16 such word rows,
  // transposed, are a tile (row i: its 16 K pairs). Both tiles of a chunk are made while a's lines are in L1.
  for (int c = 0; c < chunks; ++c) {
    for (int h = 0; h < 2; ++h) {
      const int ib = i0 + 16 * h;
      const __mmask16 cols = columns_before(m, ib);
      __m512i rows[16];
      for (int p = 0; p < 16; ++p) rows[p] = row_pair_words(a, lda, k, 32 * (c0 + c) + 2 * p, ib, cols);
      transpose_words(rows);
      std::uint16_t* tile = out + (static_cast<std::size_t>(c) * 2 + h) * kTileElements;
      for (int r = 0; r < 16; ++r) _mm512_store_si512(tile + r * 32, rows[r]);
    }
  }
}

// Column pairs [jp0, jp1) of op(B)[k, n] (row-major b with stride ldb; trans: b is [n, k]) as VNNI tiles:
// pair q's strip starts at out + (q - jp0) * strip; word (p, j) of its tile (c, h) is the pair
// (B[32 c + 2p][32 q + 16 h + j], B[32 c + 2p + 1][...]), zero past n and k.
SHARDFT_AMX_TARGET inline void pack_b_pairs(bool trans, const std::uint16_t* b, int ldb, int n, int k, int jp0, int jp1,
                                     int chunks, std::uint16_t* out) {
  const std::size_t strip = static_cast<std::size_t>(chunks) * 2 * kTileElements;
  for (int q = jp0; q < jp1; ++q) {
    for (int h = 0; h < 2; ++h) {
      const int jb = 32 * q + 16 * h;
      std::uint16_t* dst = out + (q - jp0) * strip + h * kTileElements;
      if (trans) {
        // Column j of B is row j of b: its K pairs are consecutive words, so a tile is 16 rows of b transposed.
        for (int c = 0; c < chunks; ++c) {
          __m512i rows[16];
          for (int j = 0; j < 16; ++j) {
            const std::uint16_t* src = b + static_cast<std::size_t>(jb + j) * ldb + 32 * c;
            rows[j] = jb + j < n ? _mm512_maskz_loadu_epi16(first_slots(k - 32 * c), src) : _mm512_setzero_si512();
          }
          transpose_words(rows);
          std::uint16_t* tile = dst + static_cast<std::size_t>(c) * 2 * kTileElements;
          for (int p = 0; p < 16; ++p) _mm512_store_si512(tile + p * 32, rows[p]);
        }
        continue;
      }
      const __mmask16 cols = columns_before(n, jb);
      for (int c = 0; c < chunks; ++c) {
        std::uint16_t* tile = dst + static_cast<std::size_t>(c) * 2 * kTileElements;
        for (int p = 0; p < 16; ++p) {
          _mm512_store_si512(tile + p * 32, row_pair_words(b, ldb, k, 32 * c + 2 * p, jb, cols));
        }
      }
    }
  }
}

// fp32 -> bf16 bits, round to nearest even, a NaN kept quiet with its payload: bf16::round_bits on 16 lanes.
SHARDFT_AMX_TARGET inline __m256i round_to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

// bf16 bits -> fp32 on 16 lanes (exact).
SHARDFT_AMX_TARGET inline __m512 widen_bf16(__m256i bits) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

}  // namespace shardft::amx::tiles
