// FlashAttention-2 on the host: the memory-efficient attention of kernels/attention_lse.hpp in tiles of
// Bq queries x Bk keys, every tile product an sgemm through kernels/gemm.hpp. gemm_ld works on the views'
// pointers: one head's columns of q [B*T, H*hd] are a [rows, hd] sub-matrix with ld H*hd, so nothing is
// packed or copied. Host memory only (the CPU build, Kokkos Serial, one rank per core): plain host loops
// around BLAS; a GPU build would get a kernel of its own (the dispatchers in attention_lse.cpp run the
// reference kernel for non-host memory spaces).
//
// Per (b, h), g = h / (H/G), scale = 1/sqrt(hd); Qi = q[b*T + i0 .. i0+Bq, h*hd ..] [Bq, hd], Kj, Vj = k, v
// rows j0 .. j0+Bk of kv head g [Bk, hd]; key j is visible from query i when j <= i and seq_ids equal.
// Score tiles are stored transposed, St [Bk, Bq] (a row per key, a column per query), so every per-query
// softmax step (max, exp, sum, rescale) runs along contiguous rows and vectorizes without reductions.
// forward, each query tile i (outer), each key tile j with j0 <= last query of i (inner):
//   St = scale * Kj Qi^T                        [Bk, Bq]  sgemm (N, T), k = hd
//   St_cr = -inf where key j0+c is not visible from query i0+r
//   m' = max(m, colmax St);  Pt = exp(St - m');  a = exp(m - m');  l = a l + colsum Pt;  Oi = a Oi
//   Oi += Pt^T Vj                               [Bq, hd]  sgemm (T, N), k = Bk   (Oi accumulates in o)
//   after the last key tile:  Oi /= l;  lse_i = m + log l
// backward, D_i = dO_i . O_i first and dq, dk, dv zeroed; per (b, g), each key tile j (outer), each head
// h of the group and each query tile i reaching j (inner):
//   St  = scale * Kj Qi^T;  Pt = exp(St - lse), 0 where not visible    sgemm (N, T), k = hd
//   dVj += Pt dOi                               [Bk, hd]  sgemm (N, N), k = Bq
//   dPt = Vj dOi^T                              [Bk, Bq]  sgemm (N, T), k = hd
//   dSt = Pt * (dPt - D)                        (D broadcast along each key row)
//   dQi += scale * dSt^T Kj                     [Bq, hd]  sgemm (T, N), k = Bk
//   dKj += scale * dSt Qi                       [Bk, hd]  sgemm (N, N), k = Bq
// dk, dv of a kv head gather over the H/G query heads that share it (GQA).
//
// Given the bf16 values the fp32 views were widened from (AttentionBf16Operands: the bf16 kernel's), every
// tile product runs on the CPU's AMX tiles where it has them: the score products Kj Qi^T and Vj dOi^T on
// those values (exact products either way, their fp32 sums in another order), the other three on Pt and
// dSt rounded to bf16, the rounding points of a GPU's flash kernel.
//
// Tiles fully above the causal diagonal are never visited, a tile pair whose seq-id ranges do not
// overlap (packed samples) is skipped, and the mask is applied only in tiles that are not fully
// visible (the diagonal, sample boundaries). Scratch: two [Bk, Bq] tiles and a few [Bq] rows per call;
// no [T, T] buffer. exp is exp_poly below, a branch-free polynomial (Cephes expf) the compiler
// vectorizes: at hd 64 one score carries 4*hd = 256 GEMM FLOPs in forward (~2 ns at 120 GFLOP/s), so a
// scalar libm expf per score would cost about as much as the GEMMs themselves.
// Tile size: 64 queries x 128 keys (AttentionTiles defaults), chosen on one core (Xeon 2.8 GHz, AVX-512,
// OpenBLAS 0.3.21, quiet machine) at B1 H8 G4 hd64, GFLOP/s fwd / bwd (kernel/attention_lse/...):
//   Bq x Bk      T512        T2048        OpenBLAS alone reaches ~75-95 GFLOP/s at these tile shapes:
//   64 x 64    58 / 54     64 / 63       the backward runs 5 tile products and is counted as 4, the
//   64 x 128   64 / 54     68 / 66       forward spends ~20 % of its time in the softmax.
//   128 x 64   55 / 51     65 / 62
//   128 x 128  51 / 48     60 / 57
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/attention_lse.hpp"
#include "kernels/gemm.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/seq_ranges.hpp"

namespace shardft {

namespace {

// The tiles' scratch, kept from call to call (kernels/kernel_scratch.hpp).
float* host_scratch(const char* label, std::size_t n) { return kernel_scratch<float, HostSpace>(label, n).data(); }

// e^x for any float x: 0 below -87 (masked scores are -inf), saturating at e^88; max relative error
// 1e-7 over [-87, 88]. x = n ln2 + r with |r| <= ln2/2 (Cody-Waite), e^r = 1 + r + r^2 p(r) (Cephes expf),
// 2^n written into the exponent bits. n comes from the 1.5 * 2^23 rounding trick rather than a float -> int
// conversion: gcc does not vectorize a clamp followed by a conversion (it may trap), and does this.
inline float exp_poly(float x) {
  const float keep = static_cast<float>(x >= -87.f);  // 0 for -inf; a multiply keeps the loops branch-free
  x = x < -87.f ? -87.f : x;
  x = x > 88.f ? 88.f : x;
  const float t = x * 1.44269504088896341f + 12582912.f;  // round(x log2 e) in the low mantissa bits
  const float n = t - 12582912.f;
  std::int32_t ti;
  std::memcpy(&ti, &t, sizeof ti);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const std::int32_t bits = (ti - 0x4B400000 + 127) << 23;  // (n + 127) << 23
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n * keep;
}

// Every key of the tile visible from every query: below the diagonal and one sample throughout.
bool fully_visible(int i0, int j0, int nk, SeqRange qr, SeqRange kr) {
  return j0 + nk - 1 <= i0 && qr.lo == qr.hi && kr.lo == kr.hi && qr.lo == kr.lo;
}

// St[c, r] = -inf where key j0 + c is not visible from query i0 + r.
void mask_tile(float* St, int ld, int nk, int nq, int j0, int i0, const std::int32_t* sid) {
  for (int c = 0; c < nk; ++c) {
    const int j = j0 + c;
    const std::int32_t sj = sid[j];
    float* row = St + static_cast<std::int64_t>(c) * ld;
    for (int r = 0; r < nq; ++r) {
      if (j > i0 + r || sid[i0 + r] != sj) row[r] = -INFINITY;
    }
  }
}

void zero_rows(Unmanaged2<float> x) {
  const std::size_t ld = x.stride_0(), cols = x.extent(1);
  for (std::size_t r = 0; r < x.extent(0); ++r) std::fill_n(x.data() + r * ld, cols, 0.f);
}

int tile_or_one(int t) { return t > 0 ? t : 1; }

// A score tile, St [nk, nq] = alpha A B^T from nk rows of A (keys: k or v) and nq rows of B (queries: q
// or dout), k = hd: on AMX tiles from the rows' bf16 values where both ScoreRows hold them (score_rows
// keeps them only where AMX is available), else sgemm on the fp32 rows.
struct ScoreRows {
  const float* f32;
  std::int64_t ld;
  const bf16* b16;
  std::int64_t ld16;
};
ScoreRows score_rows(const float* f32, std::int64_t ld, const bf16* b16, std::int64_t ld16, std::int64_t row0,
                     std::int64_t col0) {
  return {f32 + row0 * ld + col0, ld, b16 != nullptr && amx::available() ? b16 + row0 * ld16 + col0 : nullptr, ld16};
}
void score_tile(int nk, int nq, int hd, float alpha, const ScoreRows& a, int a_row, const ScoreRows& b, int b_row,
                float* St, int ldst) {
  if (a.b16 != nullptr && b.b16 != nullptr) {
    amx::gemm_bf16(false, true, nk, nq, hd, alpha, &(a.b16 + a_row * a.ld16)->bits, static_cast<int>(a.ld16),
                   &(b.b16 + b_row * b.ld16)->bits, static_cast<int>(b.ld16), 0.f, St, nullptr, ldst);
    return;
  }
  gemm_ld(Op::N, Op::T, nk, nq, hd, alpha, a.f32 + a_row * a.ld, static_cast<int>(a.ld), b.f32 + b_row * b.ld,
          static_cast<int>(b.ld), 0.f, St, ldst);
}

// P or dS [nk, nq] (row stride ld) rounded to bf16, where the tile products that take it run on AMX: the
// rounding a GPU's flash kernel makes to feed P and dS to its tensor cores.
void round_tile(const float* x, int nk, int nq, int ld, std::uint16_t* out) {
  for (int c = 0; c < nk; ++c) {
    const float* row = x + static_cast<std::int64_t>(c) * ld;
    std::uint16_t* to = out + static_cast<std::int64_t>(c) * ld;
    for (int r = 0; r < nq; ++r) to[r] = bf16::round_bits(row[r]);
  }
}

// C[m, hd] += alpha op(X) R on AMX tiles: X a rounded tile (ld `ldx`; trans: X^T, so X is [k, m]) and R
// rows `row` .. of a bf16 operand ([k, hd]); fp32 C with row stride ldc.
void tile_times_rows(bool trans, int m, int hd, int k, float alpha, const std::uint16_t* x, int ldx,
                     const ScoreRows& rows, int row, float* c, std::int64_t ldc) {
  amx::gemm_bf16(trans, false, m, hd, k, alpha, x, ldx, &(rows.b16 + row * rows.ld16)->bits,
                 static_cast<int>(rows.ld16), 1.f, c, nullptr, static_cast<int>(ldc));
}

}  // namespace

void attention_forward_lse_tiled(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                 Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                 Unmanaged2<float> o, Unmanaged1<float> lse, AttentionTiles tiles,
                                 const AttentionBf16Operands& bf16) {
  const int T = s.seq, H = s.heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  const int Bq = tile_or_one(tiles.query_rows), Bk = tile_or_one(tiles.key_cols);
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const std::int64_t ldq = q.stride_0(), ldk = k.stride_0(), ldv = v.stride_0(), ldo = o.stride_0();
  // St [Bk, Bq], then per query of the tile: running max m, sum l, and this key tile's max / sum / shift / rescale
  float* St = host_scratch("attention_lse_forward_tiles", static_cast<std::size_t>(Bk) * Bq + 6 * Bq);
  float *m = St + static_cast<std::size_t>(Bk) * Bq, *l = m + Bq, *mt = l + Bq, *lt = mt + Bq, *shift = lt + Bq,
        *corr = shift + Bq;
  std::uint16_t* P16 = kernel_scratch<std::uint16_t, HostSpace>("attention_lse_forward_bf16_tile",
                                                                 static_cast<std::size_t>(Bk) * Bq)
                            .data();
  for (int b = 0; b < s.batch; ++b) {
    const std::int64_t row0 = static_cast<std::int64_t>(b) * T;
    const std::int32_t* sid = seq_ids.data() + row0;
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      const ScoreRows qs = score_rows(q.data(), ldq, bf16.q, bf16.ldq, row0, h * hd);
      const ScoreRows ks = score_rows(k.data(), ldk, bf16.k, bf16.ldk, row0, g * hd);
      const ScoreRows vs = score_rows(v.data(), ldv, bf16.v, bf16.ldv, row0, g * hd);
      const float* vh = v.data() + row0 * ldv + g * hd;
      float* oh = o.data() + row0 * ldo + h * hd;
      float* lse_h = lse.data() + (row0 * H + static_cast<std::int64_t>(h) * T);
      for (int i0 = 0; i0 < T; i0 += Bq) {
        const int nq = std::min(Bq, T - i0);
        const SeqRange qr = seq_range(sid, i0, i0 + nq);
        for (int r = 0; r < nq; ++r) {
          m[r] = -INFINITY;
          l[r] = 0.f;
          std::fill_n(oh + (i0 + r) * ldo, hd, 0.f);
        }
        for (int j0 = 0; j0 < i0 + nq; j0 += Bk) {
          const int nk = std::min(Bk, i0 + nq - j0);  // keys after the tile's last query are never visible
          const SeqRange kr = seq_range(sid, j0, j0 + nk);
          if (disjoint(qr, kr)) continue;
          score_tile(nk, nq, hd, scale, ks, j0, qs, i0, St, Bq);
          if (!fully_visible(i0, j0, nk, qr, kr)) mask_tile(St, Bq, nk, nq, j0, i0, sid);
          for (int r = 0; r < nq; ++r) mt[r] = -INFINITY;
          for (int c = 0; c < nk; ++c) {
            const float* row = St + static_cast<std::int64_t>(c) * Bq;
            for (int r = 0; r < nq; ++r) mt[r] = row[r] > mt[r] ? row[r] : mt[r];
          }
          for (int r = 0; r < nq; ++r) {
            const float m_new = mt[r] > m[r] ? mt[r] : m[r];
            shift[r] = m_new == -INFINITY ? 0.f : m_new;  // nothing visible yet: P = 0, rescale 0
            corr[r] = exp_poly(m[r] - shift[r]);
            m[r] = m_new;
            lt[r] = 0.f;
          }
          for (int c = 0; c < nk; ++c) {
            float* row = St + static_cast<std::int64_t>(c) * Bq;
            for (int r = 0; r < nq; ++r) {
              const float p = exp_poly(row[r] - shift[r]);
              row[r] = p;
              lt[r] += p;
            }
          }
          for (int r = 0; r < nq; ++r) {
            l[r] = l[r] * corr[r] + lt[r];
            if (corr[r] != 1.f) {
              float* orow = oh + (i0 + r) * ldo;
              for (int e = 0; e < hd; ++e) orow[e] *= corr[r];
            }
          }
          if (vs.b16 != nullptr) {  // Oi += bf16(Pt)^T Vj on the tiles (l sums the unrounded P, as on a GPU)
            round_tile(St, nk, nq, Bq, P16);
            tile_times_rows(true, nq, hd, nk, 1.f, P16, Bq, vs, j0, oh + i0 * ldo, ldo);
          } else {
            gemm_ld(Op::T, Op::N, nq, hd, nk, 1.f, St, Bq, vh + j0 * ldv, static_cast<int>(ldv), 1.f, oh + i0 * ldo,
                    static_cast<int>(ldo));
          }
        }
        for (int r = 0; r < nq; ++r) {  // every query sees itself, so l > 0
          const float inv = 1.f / l[r];
          float* orow = oh + (i0 + r) * ldo;
          for (int e = 0; e < hd; ++e) orow[e] *= inv;
          lse_h[i0 + r] = m[r] + std::log(l[r]);
        }
      }
    }
  }
}

void attention_backward_lse_tiled(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                  Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                  Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                  Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                  Unmanaged2<float> dv, Unmanaged1<float> delta, AttentionTiles tiles,
                                  bool add_into_dkv, const AttentionBf16Operands& bf16) {
  const int T = s.seq, H = s.heads, G = s.kv_heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  const int Bq = tile_or_one(tiles.query_rows), Bk = tile_or_one(tiles.key_cols);
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const std::int64_t ldq = q.stride_0(), ldk = k.stride_0(), ldv = v.stride_0(), ldd = dout.stride_0(),
                     lddq = dq.stride_0(), lddk = dk.stride_0(), lddv = dv.stride_0();
  // dq, dk, dv accumulate from zero (dk and dv from their values on entry with add_into_dkv).
  if (o.extent(0) > 0) attention_lse_delta(s, o, dout, delta);  // an empty o: delta holds it already
  zero_rows(dq);
  if (!add_into_dkv) {
    zero_rows(dk);
    zero_rows(dv);
  }
  float* Pt = host_scratch("attention_lse_backward_tiles", 2 * static_cast<std::size_t>(Bk) * Bq);
  float* dSt = Pt + static_cast<std::size_t>(Bk) * Bq;
  std::uint16_t* P16 = kernel_scratch<std::uint16_t, HostSpace>("attention_lse_backward_bf16_tiles",
                                                                 2 * static_cast<std::size_t>(Bk) * Bq)
                            .data();
  std::uint16_t* dS16 = P16 + static_cast<std::size_t>(Bk) * Bq;
  for (int b = 0; b < s.batch; ++b) {
    const std::int64_t row0 = static_cast<std::int64_t>(b) * T;
    const std::int32_t* sid = seq_ids.data() + row0;
    for (int g = 0; g < G; ++g) {
      const float* kh = k.data() + row0 * ldk + g * hd;
      const ScoreRows ks = score_rows(k.data(), ldk, bf16.k, bf16.ldk, row0, g * hd);
      const ScoreRows vs = score_rows(v.data(), ldv, bf16.v, bf16.ldv, row0, g * hd);
      float* dkh = dk.data() + row0 * lddk + g * hd;
      float* dvh = dv.data() + row0 * lddv + g * hd;
      for (int j0 = 0; j0 < T; j0 += Bk) {
        const int nk = std::min(Bk, T - j0);
        const SeqRange kr = seq_range(sid, j0, j0 + nk);
        for (int h = g * group; h < (g + 1) * group; ++h) {
          const float* qh = q.data() + row0 * ldq + h * hd;
          const float* doh = dout.data() + row0 * ldd + h * hd;
          const ScoreRows qs = score_rows(q.data(), ldq, bf16.q, bf16.ldq, row0, h * hd);
          const ScoreRows dos = score_rows(dout.data(), ldd, bf16.dout, bf16.ldd, row0, h * hd);
          // Every product on the tiles where all four operands are held in bf16 (P and dS rounded to bf16).
          const bool on_tiles = qs.b16 != nullptr && ks.b16 != nullptr && vs.b16 != nullptr && dos.b16 != nullptr;
          float* dqh = dq.data() + row0 * lddq + h * hd;
          const std::int64_t bh = (row0 * H + static_cast<std::int64_t>(h) * T);
          const float* lse_h = lse.data() + bh;
          const float* D_h = delta.data() + bh;
          for (int i0 = (j0 / Bq) * Bq; i0 < T; i0 += Bq) {  // query tiles holding a query >= j0
            const int nq = std::min(Bq, T - i0);
            const SeqRange qr = seq_range(sid, i0, i0 + nq);
            if (disjoint(qr, kr)) continue;
            score_tile(nk, nq, hd, scale, ks, j0, qs, i0, Pt, Bq);
            if (!fully_visible(i0, j0, nk, qr, kr)) mask_tile(Pt, Bq, nk, nq, j0, i0, sid);
            const float* lse_i = lse_h + i0;
            for (int c = 0; c < nk; ++c) {
              float* row = Pt + static_cast<std::int64_t>(c) * Bq;
              for (int r = 0; r < nq; ++r) row[r] = exp_poly(row[r] - lse_i[r]);
            }
            // dVj += Pt dOi
            if (on_tiles) {
              round_tile(Pt, nk, nq, Bq, P16);
              tile_times_rows(false, nk, hd, nq, 1.f, P16, Bq, dos, i0, dvh + j0 * lddv, lddv);
            } else {
              gemm_ld(Op::N, Op::N, nk, hd, nq, 1.f, Pt, Bq, doh + i0 * ldd, static_cast<int>(ldd), 1.f,
                      dvh + j0 * lddv, static_cast<int>(lddv));
            }
            // dPt = Vj dOi^T, then dSt = Pt * (dPt - D) in place
            score_tile(nk, nq, hd, 1.f, vs, j0, dos, i0, dSt, Bq);
            const float* D_i = D_h + i0;
            for (int c = 0; c < nk; ++c) {
              const float* prow = Pt + static_cast<std::int64_t>(c) * Bq;
              float* drow = dSt + static_cast<std::int64_t>(c) * Bq;
              for (int r = 0; r < nq; ++r) drow[r] = prow[r] * (drow[r] - D_i[r]);
            }
            // dQi += scale dSt^T Kj ;  dKj += scale dSt Qi
            if (on_tiles) {
              round_tile(dSt, nk, nq, Bq, dS16);
              tile_times_rows(true, nq, hd, nk, scale, dS16, Bq, ks, j0, dqh + i0 * lddq, lddq);
              tile_times_rows(false, nk, hd, nq, scale, dS16, Bq, qs, i0, dkh + j0 * lddk, lddk);
              continue;
            }
            gemm_ld(Op::T, Op::N, nq, hd, nk, scale, dSt, Bq, kh + j0 * ldk, static_cast<int>(ldk), 1.f,
                    dqh + i0 * lddq, static_cast<int>(lddq));
            gemm_ld(Op::N, Op::N, nk, hd, nq, scale, dSt, Bq, qh + i0 * ldq, static_cast<int>(ldq), 1.f,
                    dkh + j0 * lddk, static_cast<int>(lddk));
          }
        }
      }
    }
  }
}

}  // namespace shardft
