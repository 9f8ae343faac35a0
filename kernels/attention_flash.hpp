#pragma once
// FlashAttention-2 as Kokkos hierarchical kernels: the memory-efficient attention of
// kernels/attention_lse.hpp (same arguments, same math, same lse / delta layout) for memory spaces the
// host cannot reach (the GPU build). The same source runs on Serial and OpenMP, where the tests compare
// it with the reference kernel; the host build's own path stays the sgemm-tiled kernel.
//
// scale = 1/sqrt(hd); query tile Qi = rows i0 .. i0+Bq of head h [Bq, hd], key tile Kj, Vj = rows
// j0 .. j0+Bk of kv head g = h / (H/G) [Bk, hd]; key j is visible from query i when j <= i and seq ids equal.
// forward: one team per (b, h, query tile); Qi (times scale) in team scratch, key tiles staged in scratch
// one at a time:
//   S = Qi Kj^T (masked);  m' = max(m, rowmax S);  P = exp(S - m');  a = exp(m - m');
//   l = a l + rowsum P;  Oi = a Oi + P Vj;  after the last tile Oi /= l,  lse_i = m + log l
// backward: D_i = dO_i . O_i, then two kernels that need no atomics (P is recomputed in each: one more
// Qi Kj^T than FlashAttention-2's atomic dq, in exchange for a deterministic result):
//   dq: one team per (b, h, query tile), over the key tiles reaching it:
//     P = exp(scale Qi Kj^T - lse);  dS = P * (dOi Vj^T - D);  dQi += scale dS Kj
//   dk, dv: one team per (b, g, key tile), over the H/G query heads sharing g and the query tiles at or
//   after the key tile:
//     dVj += P^T dOi;  dKj += scale dS^T Qi
// Each team owns its output rows, so the accumulators live in the output views (each element updated by
// one thread per phase); scratch holds only what every thread of the team reads: the tiles and S.
// Key tiles above the causal diagonal are never visited; a tile pair whose seq-id ranges [min, max] do
// not overlap (different packed samples) is skipped.
#include "kernels/attention.hpp"

namespace shardft {

// Rows per query tile and per key tile. 0: the largest square (or Bk = Bq/2) tiles whose scratch fits the
// team scratch limit of level 0 and 40 KiB (a CUDA block's shared memory without opt-in, less what Kokkos
// keeps for team reductions), so the host tests run the tile sizes a GPU gets.
// team_size: threads per team (0: Kokkos picks); tests set it to run a tile on several host threads.
struct FlashTiles {
  int query_rows = 0;
  int key_cols = 0;
  int team_size = 0;
};

// Same contract as attention_forward_lse: o [B*T, H*hd], lse [B*H*T].
void attention_forward_lse_flash(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                 Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                 Unmanaged2<float> o, Unmanaged1<float> lse, FlashTiles tiles = {});

// Same contract as attention_backward_lse: overwrites dq, dk, dv; delta [B*H*T] holds D on return.
void attention_backward_lse_flash(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                  Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                  Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                  Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                  Unmanaged2<float> dv, Unmanaged1<float> delta, FlashTiles tiles = {});

// The tiles each kernel runs with for this head_dim when none are given (forward, dq, dk/dv).
struct FlashTilePlan {
  FlashTiles forward, dq, dkv;
};
FlashTilePlan flash_tile_plan(int head_dim);

}  // namespace shardft
