// Fused causal attention in fp32 on AVX-512 FMAs (kernels/avx512_attention_fp32.hpp).
//
// Every tile product is C [M x N] (= or +=) A [M x K] B [K x N] with N a multiple of 16 held in vectors and
// B read a row of vectors at a time: a register block of R rows x V vectors of C (R V <= 24 accumulators)
// takes, per step along K, V vector loads of B's row and R broadcasts of A's column. The operands are laid
// out so that B's rows are contiguous and A's column entries sit at fixed offsets:
//   S = K_j Q_i^T and dP = V_j dO_i^T     [64 keys x 64 queries]   A = K^T, V^T, B = Q^T, dO^T (by tiles)
//   O_i^T += V_j^T P                      [hd x 64 queries]        A = V's rows, B = P
//   dV_j += P dO_i,  dK_j += dS Q_i       [keys x hd]              A = P, dS (a tile's rows), B = dO's, Q's rows
//   dQ_i += dS^T K_j                      [queries x hd]           A = dS's columns, B = K's rows
// so O is held transposed (its per-query rescale is a vector multiply) and no tile is ever transposed.
// Every operand is first packed (rows hd apart, or transposed tile by tile; 16 x 16 transposes): rows of
// q, k, v and dout lie H * hd floats apart, which at 2 KB maps a tile's rows onto a few of the L1's sets.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/avx512_attention_fp32.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/cpu/avx512_transpose.hpp"
#include "kernels/seq_ranges.hpp"

#define SHARDFT_AVX512_ATTENTION_TARGET __attribute__((target("avx512f")))
#define SHARDFT_FLASH_TARGET SHARDFT_AVX512_ATTENTION_TARGET
#include "kernels/cpu/flash_softmax.hpp"

namespace shardft::avx512 {

namespace {

using namespace flash;

// Where A's entries lie: A(r, k) = a[k * ka + r] (kColumns: each column of A contiguous) or
// a[r * kTile + k] (kTileRows: A is a score tile, a row per key).
enum class ALayout { kColumns, kTileRows };

// C [R x 16 V] (= or += where `accumulate`) A [R x K] B [K x 16 V]; B's rows ldb apart, C's ldc.
template <ALayout L, int R, int V>
SHARDFT_AVX512_ATTENTION_TARGET void block(const float* a, std::int64_t ka, const float* b, std::int64_t ldb, int K,
                                           float* c, std::int64_t ldc, bool accumulate) {
  __m512 acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = accumulate ? _mm512_loadu_ps(c + r * ldc + 16 * v) : _mm512_setzero_ps();
  }
  for (int k = 0; k < K; ++k) {
    __m512 bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) bv[v] = _mm512_loadu_ps(b + k * ldb + 16 * v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(L == ALayout::kColumns ? a[k * ka + r] : a[r * kTile + k]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
  }
}

// Rows per register block for V vectors: 24 accumulators (of 32 registers), at most 12 broadcasts per step.
template <int V>
constexpr int rows_per_block() {
  return V >= 3 ? 24 / V : 12;
}

// The last `rows` (< R) rows of a column strip.
template <ALayout L, int V, int R>
SHARDFT_AVX512_ATTENTION_TARGET void tail_rows(int rows, const float* a, std::int64_t ka, const float* b,
                                               std::int64_t ldb, int K, float* c, std::int64_t ldc, bool accumulate) {
  if constexpr (R > 0) {
    if (rows == R) return block<L, R, V>(a, ka, b, ldb, K, c, ldc, accumulate);
    tail_rows<L, V, R - 1>(rows, a, ka, b, ldb, K, c, ldc, accumulate);
  }
}

// One strip of 16 V columns of C, all M rows.
template <ALayout L, int V>
SHARDFT_AVX512_ATTENTION_TARGET void strip(int M, const float* a, std::int64_t ka, const float* b, std::int64_t ldb,
                                           int K, float* c, std::int64_t ldc, bool accumulate) {
  constexpr int R = rows_per_block<V>();
  const std::int64_t row_step = L == ALayout::kColumns ? 1 : kTile;
  int m = 0;
  for (; m + R <= M; m += R) block<L, R, V>(a + m * row_step, ka, b, ldb, K, c + m * ldc, ldc, accumulate);
  if (m < M) tail_rows<L, V, R - 1>(M - m, a + m * row_step, ka, b, ldb, K, c + m * ldc, ldc, accumulate);
}

// C [M x N] (= or +=) A [M x K] B [K x N], N a multiple of 16: strips of 64 columns, then the rest.
template <ALayout L>
SHARDFT_AVX512_ATTENTION_TARGET void product(int M, int N, int K, const float* a, std::int64_t ka, const float* b,
                                             std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate) {
  for (int n = 0; n < N; n += 64) {
    switch (std::min(4, (N - n) / 16)) {
      case 4: strip<L, 4>(M, a, ka, b + n, ldb, K, c + n, ldc, accumulate); break;
      case 3: strip<L, 3>(M, a, ka, b + n, ldb, K, c + n, ldc, accumulate); break;
      case 2: strip<L, 2>(M, a, ka, b + n, ldb, K, c + n, ldc, accumulate); break;
      default: strip<L, 1>(M, a, ka, b + n, ldb, K, c + n, ldc, accumulate); break;
    }
  }
}

// S [64 keys][64 queries] = key tile j0 of a packed X^T times query tile i0 of a packed Y^T (pack_tiles).
SHARDFT_AVX512_ATTENTION_TARGET void scores(const float* xt, const float* yt, int hd, int j0, int i0, float* St) {
  const std::size_t tile = static_cast<std::size_t>(hd) * kTile;
  product<ALayout::kColumns>(kTile, kTile, hd, xt + j0 / kTile * tile, kTile, yt + i0 / kTile * tile, kTile, St, kTile,
                             false);
}

// The 16 x 16 block of x (rows ld apart; rows from `rows` on read as zero), transposed into out (rows ld_out
// apart, 64-byte aligned).
SHARDFT_AVX512_ATTENTION_TARGET void transpose_block(const float* x, std::int64_t ld, int rows, float* out,
                                                     std::int64_t ld_out) {
  __m512i r[16];
  for (int i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_castps_si512(_mm512_loadu_ps(x + i * ld)) : _mm512_setzero_si512();
  avx512::transpose_words(r);
  for (int j = 0; j < 16; ++j) _mm512_store_ps(out + j * ld_out, _mm512_castsi512_ps(r[j]));
}

// x^T tile by tile from rows [T][hd] (ld apart): tile t's [hd][64] block contiguous at xt + t * hd * 64 (its
// rows 256 bytes apart, where a [hd][T] transpose would put them T * 4 bytes apart), the columns past T zero.
SHARDFT_AVX512_ATTENTION_TARGET void pack_tiles(const float* x, std::int64_t ld, int T, int hd, int Tp, float* xt) {
  for (int t0 = 0; t0 < Tp; t0 += 16) {
    float* tile = xt + static_cast<std::size_t>(t0 / kTile) * hd * kTile + t0 % kTile;
    for (int d0 = 0; d0 < hd; d0 += 16) {
      const int rows = std::clamp(T - t0, 0, 16);
      transpose_block(rows > 0 ? x + t0 * ld + d0 : x, ld, rows, tile + d0 * kTile, kTile);
    }
  }
}

// Rows [T][hd] (ld apart) copied to rows hd apart.
void pack_rows(const float* x, std::int64_t ld, int T, int hd, float* out) {
  for (int t = 0; t < T; ++t) std::copy_n(x + t * ld, hd, out + static_cast<std::size_t>(t) * hd);
}

// Per-call buffers, kept for the next call on this thread.
struct Workspace {
  std::vector<float> f32[8];
};
Workspace& workspace() {
  thread_local Workspace w;
  return w;
}

// o's rows [nq][hd] (ldo apart) = O^T [hd][64]'s columns times inv[row].
SHARDFT_AVX512_ATTENTION_TARGET void write_rows(const float* Ot, int hd, int nq, const float* inv, float* o,
                                                std::int64_t ldo) {
  alignas(64) float block[16 * 16];
  for (int r0 = 0; r0 < nq; r0 += 16) {
    for (int d0 = 0; d0 < hd; d0 += 16) {
      transpose_block(Ot + d0 * kTile + r0, kTile, 16, block, 16);
      for (int i = 0; i < std::min(16, nq - r0); ++i) {
        _mm512_storeu_ps(o + (r0 + i) * ldo + d0,
                         _mm512_mul_ps(_mm512_load_ps(block + 16 * i), _mm512_set1_ps(inv[r0 + i])));
      }
    }
  }
}

SHARDFT_AVX512_ATTENTION_TARGET void forward_group(const AttentionGroup& g, float* o, std::int64_t ldo, float* lse,
                                                   std::int64_t lse_head) {
  const int T = g.seq, hd = g.head_dim, Tp = padded(T);
  const std::size_t panel = static_cast<std::size_t>(Tp) * hd;
  Workspace& w = workspace();
  float* const kt = aligned_floats(w.f32[0], panel);      // K^T by tiles
  float* const v_rows = aligned_floats(w.f32[1], panel);  // V's rows
  float* const qt = aligned_floats(w.f32[2], panel);      // Q^T by tiles, one head
  float* const St = aligned_floats(w.f32[3], kTile * kTile);
  float* const Ot = aligned_floats(w.f32[4], static_cast<std::size_t>(hd) * kTile);  // O^T [hd][64]
  OnlineSoftmax sm;
  pack_tiles(g.k, g.ldk, T, hd, Tp, kt);
  pack_rows(g.v, g.ldv, T, hd, v_rows);
  for (int h = 0; h < g.heads; ++h) {
    pack_tiles(g.q + h * hd, g.ldq, T, hd, Tp, qt);
    for (int i0 = 0; i0 < T; i0 += kTile) {
      const int nq = std::min(kTile, T - i0);
      const SeqRange qr = seq_range(g.seq_ids, i0, i0 + nq);
      sm.start();
      std::fill_n(Ot, static_cast<std::size_t>(hd) * kTile, 0.f);
      for (int j0 = 0; j0 < i0 + nq; j0 += kTile) {
        const int nk = std::min(kTile, T - j0);
        const SeqRange kr = seq_range(g.seq_ids, j0, std::min(i0 + nq, j0 + kTile));
        if (disjoint(qr, kr)) continue;
        scores(kt, qt, hd, j0, i0, St);
        if (!fully_visible(i0, j0, qr, kr)) mask(St, j0, i0, T, g.seq_ids, one_sample(qr, kr));
        sm.tile(St, g.scale, StoreFloats{St});
        for (int d = 0; d < hd; ++d) {
          float* row = Ot + d * kTile;
          for (int r = 0; r < kTile; r += 16) {
            _mm512_store_ps(row + r, _mm512_mul_ps(_mm512_load_ps(row + r), _mm512_load_ps(sm.corr + r)));
          }
        }
        product<ALayout::kColumns>(hd, kTile, nk, v_rows + j0 * hd, hd, St, kTile, Ot, kTile, true);
      }
      for (int r = 0; r < nq; ++r) {  // every query sees itself, so l > 0
        lse[h * lse_head + i0 + r] = sm.m[r] + std::log(sm.l[r]);
        sm.l[r] = 1.f / sm.l[r];
      }
      write_rows(Ot, hd, nq, sm.l, o + i0 * ldo + h * hd, ldo);
    }
  }
}

// out's rows [T][hd] (ld apart) = scale times acc's (rows hd apart).
void write_scaled_rows(const float* acc, int T, int hd, float scale, float* out, std::int64_t ld) {
  for (int t = 0; t < T; ++t) {
    const float* row = acc + static_cast<std::size_t>(t) * hd;
    for (int e = 0; e < hd; ++e) out[t * ld + e] = scale * row[e];
  }
}

SHARDFT_AVX512_ATTENTION_TARGET void backward_group(const AttentionGroup& g, const float* dout, std::int64_t ldd,
                                                    const float* lse, const float* delta, std::int64_t stat_head,
                                                    float* dq, std::int64_t lddq, float* dk, std::int64_t lddk,
                                                    float* dv, std::int64_t lddv) {
  const int T = g.seq, hd = g.head_dim, Tp = padded(T);
  const std::size_t panel = static_cast<std::size_t>(Tp) * hd;
  Workspace& w = workspace();
  float* const kvt = aligned_floats(w.f32[0], 2 * panel);  // K^T and V^T by tiles
  float *const kt = kvt, *const vt = kvt + panel;
  float* const k_rows = aligned_floats(w.f32[1], panel);   // K's rows
  float* const qdo = aligned_floats(w.f32[2], 4 * panel);  // one head's Q^T and dO^T by tiles, its Q and dO rows
  float *const qt = qdo, *const dot = qdo + panel, *const q_rows = qdo + 2 * panel, *const do_rows = qdo + 3 * panel;
  float* const St = aligned_floats(w.f32[3], 2 * kTile * kTile);  // P, then dP -> dS
  float* const dSt = St + kTile * kTile;
  float* const dQ = aligned_floats(w.f32[4], panel);  // [Tp][hd] each
  float* const dK = aligned_floats(w.f32[5], 2 * panel);
  float* const dV = dK + panel;
  float* const stats = aligned_floats(w.f32[6], 2 * static_cast<std::size_t>(Tp));  // lse, D padded to Tp
  float *const lse_p = stats, *const d_p = stats + Tp;
  pack_tiles(g.k, g.ldk, T, hd, Tp, kt);
  pack_tiles(g.v, g.ldv, T, hd, Tp, vt);
  pack_rows(g.k, g.ldk, T, hd, k_rows);
  std::fill_n(dK, 2 * panel, 0.f);
  for (int h = 0; h < g.heads; ++h) {
    pack_tiles(g.q + h * hd, g.ldq, T, hd, Tp, qt);
    pack_tiles(dout + h * hd, ldd, T, hd, Tp, dot);
    pack_rows(g.q + h * hd, g.ldq, T, hd, q_rows);
    pack_rows(dout + h * hd, ldd, T, hd, do_rows);
    for (int i = 0; i < Tp; ++i) {  // queries past the end: P = exp(-inf) = 0
      lse_p[i] = i < T ? lse[h * stat_head + i] : kInf;
      d_p[i] = i < T ? delta[h * stat_head + i] : 0.f;
    }
    std::fill_n(dQ, panel, 0.f);
    for (int j0 = 0; j0 < T; j0 += kTile) {
      const int nk = std::min(kTile, T - j0);
      const SeqRange kr = seq_range(g.seq_ids, j0, j0 + nk);
      for (int i0 = j0; i0 < T; i0 += kTile) {  // the query tiles holding a query at or after j0
        const int nq = std::min(kTile, T - i0);
        const SeqRange qr = seq_range(g.seq_ids, i0, i0 + nq);
        if (disjoint(qr, kr)) continue;
        scores(kt, qt, hd, j0, i0, St);
        if (!fully_visible(i0, j0, qr, kr)) mask(St, j0, i0, T, g.seq_ids, one_sample(qr, kr));
        probabilities(St, g.scale, lse_p + i0, StoreFloats{St});
        // dV_j += P dO_i
        product<ALayout::kTileRows>(nk, hd, nq, St, 0, do_rows + i0 * hd, hd, dV + j0 * hd, hd, true);
        scores(vt, dot, hd, j0, i0, dSt);  // dP = V_j dO_i^T
        score_gradients(St, dSt, d_p + i0, StoreFloats{dSt});
        // dK_j += dS Q_i ;  dQ_i += dS^T K_j  (both scaled at the end)
        product<ALayout::kTileRows>(nk, hd, nq, dSt, 0, q_rows + i0 * hd, hd, dK + j0 * hd, hd, true);
        product<ALayout::kColumns>(nq, hd, nk, dSt, kTile, k_rows + j0 * hd, hd, dQ + i0 * hd, hd, true);
      }
    }
    write_scaled_rows(dQ, T, hd, g.scale, dq + h * hd, lddq);
  }
  write_scaled_rows(dK, T, hd, g.scale, dk, lddk);
  write_scaled_rows(dV, T, hd, 1.f, dv, lddv);
}

}  // namespace

bool attention_fits(int head_dim) {
  static const bool cpu_has = host_cpu_features().avx512f;  // CPUID once: in a VM each one traps
  return cpu_has && head_dim >= 16 && head_dim <= 256 && head_dim % 16 == 0;
}

void attention_forward(const AttentionGroup& g, float* o, std::int64_t ldo, float* lse, std::int64_t lse_head) {
  forward_group(g, o, ldo, lse, lse_head);
}

void attention_backward(const AttentionGroup& g, const float* dout, std::int64_t ldd, const float* lse,
                        const float* delta, std::int64_t stat_head, float* dq, std::int64_t lddq, float* dk,
                        std::int64_t lddk, float* dv, std::int64_t lddv) {
  backward_group(g, dout, ldd, lse, delta, stat_head, dq, lddq, dk, lddk, dv, lddv);
}

}  // namespace shardft::avx512
