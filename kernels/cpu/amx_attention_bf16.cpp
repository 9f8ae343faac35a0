// Fused causal attention on AMX tiles (kernels/amx_attention_bf16.hpp), compiled with -mamx-tile
// -mamx-bf16 like amx_gemm_bf16.cpp.
//
// Tiles of 64 queries x 64 keys, held transposed: St [64 keys][64 queries] fp32, so that every per-query
// step of the softmax (max, exp, sums, rescale) runs along contiguous rows and vectorises without
// reductions. Each tile product is a few 32 x 32 blocks of four fp32 tiles (block() below) over operands
// packed once: per kv head, K and V as A strips (rows = keys), K and V as VNNI B strips; per query head,
// Q and dO as B strips both ways. P and dS are rounded into plain [key][query] bf16 tiles that the products
// with keys as rows read in place; the products with queries as rows take them through 16 x 16 transposes
// (pack_a_strip). Accumulators (O, dQ, dK, dV) stay in fp32 memory and are loaded into the tiles for each
// product; dK and dQ are scaled once at the end.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/amx_attention_bf16.hpp"
#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/bf16.hpp"
#include "kernels/blas_core.hpp"
#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/seq_ranges.hpp"

// The softmax also converts P and dS with AVX-512 BF16 (every CPU with AMX-BF16 has it; checked in
// attention_fits).
#define SHARDFT_AMX_ATTENTION_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))
#define SHARDFT_FLASH_TARGET SHARDFT_AMX_ATTENTION_TARGET
#include "kernels/cpu/flash_softmax.hpp"

namespace shardft::amx {

namespace {

using namespace tiles;
using namespace flash;

constexpr int kStep = 2 * kTileElements;  // one step of 32 along K in a packed strip: its two tiles

// Where an A operand's tiles lie: tile (half h, step s) at p + h * second + s * step, rows `stride` bytes apart.
struct ATiles {
  const std::uint16_t* p;
  std::size_t second, step;
  int stride;
};
ATiles packed_a(const std::uint16_t* strip) { return {strip, kTileElements, kStep, 64}; }
// 32 rows of a plain row-major [rows][ld] bf16 matrix, read in place.
ATiles plain_a(const std::uint16_t* x, int ld) { return {x, static_cast<std::size_t>(16) * ld, 32, 2 * ld}; }

// C [32 x 32] fp32 (rows ldc apart) = (or += where `accumulate`) A's 32 rows times the B strip's 32 columns
// over `steps` steps of 32 along K.
SHARDFT_AMX_TARGET void block(const ATiles& a, const std::uint16_t* b, int steps, float* c, int ldc, bool accumulate) {
  const int cs = 4 * ldc;
  if (accumulate) {
    _tile_loadd(0, c, cs);
    _tile_loadd(1, c + 16, cs);
    _tile_loadd(2, c + 16 * ldc, cs);
    _tile_loadd(3, c + 16 * ldc + 16, cs);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int s = 0; s < steps; ++s) {
    const std::uint16_t* as = a.p + s * a.step;
    const std::uint16_t* bs = b + static_cast<std::size_t>(s) * kStep;
    _tile_loadd(4, as, a.stride);
    _tile_loadd(6, bs, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, bs + kTileElements, 64);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, as + a.second, a.stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, cs);
  _tile_stored(1, c + 16, cs);
  _tile_stored(2, c + 16 * ldc, cs);
  _tile_stored(3, c + 16 * ldc + 16, cs);
}

// St [64 keys][64 queries] = K_j Q_i^T from K's A strips and Q^T's B strips (hd / 32 steps each).
SHARDFT_AMX_TARGET void scores(const std::uint16_t* k_strips, const std::uint16_t* qt_strips, int j0, int i0,
                               int steps, float* St) {
  const std::size_t strip = static_cast<std::size_t>(steps) * kStep;
  for (int kp = 0; kp < 2; ++kp) {
    for (int qp = 0; qp < 2; ++qp) {
      block(packed_a(k_strips + (j0 / 32 + kp) * strip), qt_strips + (i0 / 32 + qp) * strip, steps,
            St + kp * 32 * kTile + qp * 32, kTile, false);
    }
  }
}

// acc rows r0 .. r0 + 63 (fp32 [rows][hd]) += A (64 rows: two row pairs) times rows `s0` / 32 .. of the B
// strips of an [*, hd] operand (one strip per 32 columns of hd, `b_steps` steps each), over 64 along K.
SHARDFT_AMX_TARGET void accumulate_rows(const ATiles& a0, const ATiles& a1, const std::uint16_t* b_strips, int b_steps,
                                        int s0, int hd, float* acc) {
  const std::size_t strip = static_cast<std::size_t>(b_steps) * kStep;
  for (int cp = 0; cp < hd / 32; ++cp) {
    const std::uint16_t* b = b_strips + cp * strip + static_cast<std::size_t>(s0 / 32) * kStep;
    block(a0, b, 2, acc + cp * 32, hd, true);
    block(a1, b, 2, acc + 32 * hd + cp * 32, hd, true);
  }
}

// A (queries x keys) from a plain [64 keys][64 queries] bf16 tile: its two row pairs of queries packed
// through 16 x 16 transposes into `out` (2 strips of 2 steps).
SHARDFT_AMX_TARGET void transposed_rows(const std::uint16_t* tile, std::uint16_t* out) {
  for (int rp = 0; rp < 2; ++rp) pack_a_strip(true, tile, kTile, kTile, kTile, 32 * rp, 0, 2, out + rp * 2 * kStep);
}

// 16 floats to bf16 (round to nearest even; P and dS, which only the tiles read).
SHARDFT_AMX_ATTENTION_TARGET inline void store_bf16(std::uint16_t* to, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
}

// P or dS for the tiles: its bf16 rounding only.
struct StoreBf16 {
  std::uint16_t* to;
  SHARDFT_AMX_ATTENTION_TARGET void operator()(int at, __m512 v) const { store_bf16(to + at, v); }
};
// The backward's P: in place in fp32 (dS takes it unrounded) and its bf16 rounding for the tiles.
struct StoreBoth {
  float* to;
  std::uint16_t* to16;
  SHARDFT_AMX_ATTENTION_TARGET void operator()(int at, __m512 v) const {
    _mm512_store_ps(to + at, v);
    store_bf16(to16 + at, v);
  }
};

// Per-call buffers, kept for the next call on this thread.
struct Workspace {
  std::vector<std::uint16_t> b16[8];
  std::vector<float> f32[6];
};
Workspace& workspace() {
  thread_local Workspace w;
  return w;
}

SHARDFT_AMX_ATTENTION_TARGET void forward_group(const AttentionGroup& g, std::uint16_t* o, std::int64_t ldo,
                                                float* lse, std::int64_t lse_head) {
  const int T = g.seq, hd = g.head_dim, Tp = padded(T), steps = hd / 32, key_steps = Tp / 32;
  const std::size_t panel = static_cast<std::size_t>(Tp) * hd;  // a packed [Tp, hd] operand
  Workspace& w = workspace();
  std::uint16_t* const k_strips = cache_aligned(w.b16[0], panel);   // K as A: a strip per 32 keys
  std::uint16_t* const v_strips = cache_aligned(w.b16[1], panel);   // V as B: a strip per 32 columns of hd
  std::uint16_t* const qt_strips = cache_aligned(w.b16[2], panel);  // Q^T as B: a strip per 32 queries
  std::uint16_t* const P16 = cache_aligned(w.b16[3], kTile * kTile);
  std::uint16_t* const p_rows = cache_aligned(w.b16[4], 4 * kStep);  // P as A (queries x keys)
  float* const St = aligned_floats(w.f32[0], kTile * kTile);
  float* const O = aligned_floats(w.f32[1], static_cast<std::size_t>(kTile) * hd);
  OnlineSoftmax sm;
  configure_tiles();
  for (int ip = 0; ip < key_steps; ++ip) {
    pack_a_strip(false, g.k, static_cast<int>(g.ldk), T, hd, 32 * ip, 0, steps, k_strips + ip * steps * kStep);
  }
  pack_b_pairs(false, g.v, static_cast<int>(g.ldv), hd, T, 0, steps, key_steps, v_strips);
  for (int h = 0; h < g.heads; ++h) {
    pack_b_pairs(true, g.q + h * hd, static_cast<int>(g.ldq), T, hd, 0, key_steps, steps, qt_strips);
    for (int i0 = 0; i0 < T; i0 += kTile) {
      const int nq = std::min(kTile, T - i0);
      const SeqRange qr = seq_range(g.seq_ids, i0, i0 + nq);
      sm.start();
      std::fill_n(O, static_cast<std::size_t>(kTile) * hd, 0.f);
      for (int j0 = 0; j0 < i0 + nq; j0 += kTile) {
        const SeqRange kr = seq_range(g.seq_ids, j0, std::min(i0 + nq, j0 + kTile));
        if (disjoint(qr, kr)) continue;
        scores(k_strips, qt_strips, j0, i0, steps, St);
        if (!fully_visible(i0, j0, qr, kr)) mask(St, j0, i0, T, g.seq_ids, one_sample(qr, kr));
        sm.tile(St, g.scale, StoreBf16{P16});
        for (int r = 0; r < nq; ++r) {
          if (sm.corr[r] == 1.f) continue;
          float* orow = O + static_cast<std::size_t>(r) * hd;
          for (int e = 0; e < hd; ++e) orow[e] *= sm.corr[r];
        }
        transposed_rows(P16, p_rows);  // O += P V_j
        accumulate_rows(packed_a(p_rows), packed_a(p_rows + 2 * kStep), v_strips, key_steps, j0, hd, O);
      }
      for (int r = 0; r < nq; ++r) {  // every query sees itself, so l > 0
        const float inv = 1.f / sm.l[r];
        const float* orow = O + static_cast<std::size_t>(r) * hd;
        std::uint16_t* out = o + (i0 + r) * ldo + h * hd;
        for (int e = 0; e < hd; ++e) out[e] = bf16::round_bits(orow[e] * inv);
        lse[h * lse_head + i0 + r] = sm.m[r] + std::log(sm.l[r]);
      }
    }
  }
  _tile_release();
}

SHARDFT_AMX_ATTENTION_TARGET void backward_group(const AttentionGroup& g, const std::uint16_t* dout, std::int64_t ldd,
                                       const float* lse, const float* delta, std::int64_t stat_head, std::uint16_t* dq,
                                       std::int64_t lddq, std::uint16_t* dk, std::int64_t lddk, std::uint16_t* dv,
                                       std::int64_t lddv) {
  const int T = g.seq, hd = g.head_dim, Tp = padded(T), steps = hd / 32, key_steps = Tp / 32;
  const std::size_t panel = static_cast<std::size_t>(Tp) * hd;
  Workspace& w = workspace();
  std::uint16_t* const k_strips = cache_aligned(w.b16[0], panel);    // K as A (rows = keys)
  std::uint16_t* const v_strips = cache_aligned(w.b16[1], panel);    // V as A
  std::uint16_t* const kb_strips = cache_aligned(w.b16[2], panel);   // K as B (columns = hd)
  std::uint16_t* const qt_strips = cache_aligned(w.b16[3], panel);   // Q^T as B (columns = queries)
  std::uint16_t* const qb_strips = cache_aligned(w.b16[4], panel);   // Q as B (columns = hd)
  std::uint16_t* const dot_strips = cache_aligned(w.b16[5], panel);  // dO^T as B
  std::uint16_t* const dob_strips = cache_aligned(w.b16[6], panel);  // dO as B
  std::uint16_t* const tiles16 = cache_aligned(w.b16[7], 2 * kTile * kTile + 4 * kStep);
  std::uint16_t *const P16 = tiles16, *const dS16 = tiles16 + kTile * kTile, *const ds_rows = dS16 + kTile * kTile;
  float* const St = aligned_floats(w.f32[0], 2 * kTile * kTile);
  float* const dSt = St + kTile * kTile;
  float* const dQ = aligned_floats(w.f32[1], panel);
  float* const dK = aligned_floats(w.f32[2], panel);
  float* const dV = aligned_floats(w.f32[3], panel);
  float* const stats = aligned_floats(w.f32[4], 2 * static_cast<std::size_t>(Tp));  // lse, D padded to Tp
  float *const lse_p = stats, *const d_p = stats + Tp;
  configure_tiles();
  for (int ip = 0; ip < key_steps; ++ip) {
    pack_a_strip(false, g.k, static_cast<int>(g.ldk), T, hd, 32 * ip, 0, steps, k_strips + ip * steps * kStep);
    pack_a_strip(false, g.v, static_cast<int>(g.ldv), T, hd, 32 * ip, 0, steps, v_strips + ip * steps * kStep);
  }
  pack_b_pairs(false, g.k, static_cast<int>(g.ldk), hd, T, 0, steps, key_steps, kb_strips);
  std::fill_n(dK, panel, 0.f);
  std::fill_n(dV, panel, 0.f);
  for (int h = 0; h < g.heads; ++h) {
    const std::uint16_t* qh = g.q + h * hd;
    const std::uint16_t* doh = dout + h * hd;
    pack_b_pairs(true, qh, static_cast<int>(g.ldq), T, hd, 0, key_steps, steps, qt_strips);
    pack_b_pairs(false, qh, static_cast<int>(g.ldq), hd, T, 0, steps, key_steps, qb_strips);
    pack_b_pairs(true, doh, static_cast<int>(ldd), T, hd, 0, key_steps, steps, dot_strips);
    pack_b_pairs(false, doh, static_cast<int>(ldd), hd, T, 0, steps, key_steps, dob_strips);
    for (int i = 0; i < Tp; ++i) {  // queries past the end: P = exp(-inf) = 0
      lse_p[i] = i < T ? lse[h * stat_head + i] : kInf;
      d_p[i] = i < T ? delta[h * stat_head + i] : 0.f;
    }
    std::fill_n(dQ, panel, 0.f);
    for (int j0 = 0; j0 < T; j0 += kTile) {
      const SeqRange kr = seq_range(g.seq_ids, j0, std::min(T, j0 + kTile));
      for (int i0 = j0; i0 < T; i0 += kTile) {  // the query tiles holding a query at or after j0
        const SeqRange qr = seq_range(g.seq_ids, i0, std::min(T, i0 + kTile));
        if (disjoint(qr, kr)) continue;
        scores(k_strips, qt_strips, j0, i0, steps, St);
        if (!fully_visible(i0, j0, qr, kr)) mask(St, j0, i0, T, g.seq_ids, one_sample(qr, kr));
        probabilities(St, g.scale, lse_p + i0, StoreBoth{St, P16});
        // dV_j += P dO_i (P: rows = keys, read in place)
        accumulate_rows(plain_a(P16, kTile), plain_a(P16 + 32 * kTile, kTile), dob_strips, key_steps, i0, hd,
                        dV + static_cast<std::size_t>(j0) * hd);
        scores(v_strips, dot_strips, j0, i0, steps, dSt);  // dP = V_j dO_i^T
        score_gradients(St, dSt, d_p + i0, StoreBf16{dS16});
        // dK_j += dS Q_i ;  dQ_i += dS^T K_j  (both scaled at the end)
        accumulate_rows(plain_a(dS16, kTile), plain_a(dS16 + 32 * kTile, kTile), qb_strips, key_steps, i0, hd,
                        dK + static_cast<std::size_t>(j0) * hd);
        transposed_rows(dS16, ds_rows);
        accumulate_rows(packed_a(ds_rows), packed_a(ds_rows + 2 * kStep), kb_strips, key_steps, j0, hd,
                        dQ + static_cast<std::size_t>(i0) * hd);
      }
    }
    for (int i = 0; i < T; ++i) {
      const float* row = dQ + static_cast<std::size_t>(i) * hd;
      std::uint16_t* out = dq + i * lddq + h * hd;
      for (int e = 0; e < hd; ++e) out[e] = bf16::round_bits(g.scale * row[e]);
    }
  }
  for (int j = 0; j < T; ++j) {
    const float* krow = dK + static_cast<std::size_t>(j) * hd;
    const float* vrow = dV + static_cast<std::size_t>(j) * hd;
    std::uint16_t* kout = dk + j * lddk;
    std::uint16_t* vout = dv + j * lddv;
    for (int e = 0; e < hd; ++e) {
      kout[e] = bf16::round_bits(g.scale * krow[e]);
      vout[e] = bf16::round_bits(vrow[e]);
    }
  }
  _tile_release();
}

}  // namespace

bool attention_fits(int head_dim) {
  static const bool cpu_has = host_cpu_features().avx512_bf16;  // CPUID once: in a VM each one traps
  return available() && cpu_has && head_dim >= 32 && head_dim <= 256 &&
         head_dim % 32 == 0;
}

void attention_forward(const AttentionGroup& g, std::uint16_t* o, std::int64_t ldo, float* lse, std::int64_t lse_head) {
  forward_group(g, o, ldo, lse, lse_head);
}

void attention_backward(const AttentionGroup& g, const std::uint16_t* dout, std::int64_t ldd, const float* lse,
                        const float* delta, std::int64_t stat_head, std::uint16_t* dq, std::int64_t lddq,
                        std::uint16_t* dk, std::int64_t lddk, std::uint16_t* dv, std::int64_t lddv) {
  backward_group(g, dout, ldd, lse, delta, stat_head, dq, lddq, dk, lddk, dv, lddv);
}

}  // namespace shardft::amx
