#pragma once
// Memory-efficient causal GQA attention: same math as kernels/attention.hpp, but the [T,T] score
// matrix is never stored. Forward keeps per query row only the log-sum-exp of its scores,
//   lse[b,h,i] = log sum_{j visible} exp(S_ij),   o_i = sum_j exp(S_ij - lse_i) v_j
// (one pass with an online max and rescaled sum). Backward recomputes P_ij = exp(S_ij - lse_i) and
// uses D_i = do_i . o_i = sum_j P_ij dP_ij:
//   dS_ij = P_ij (do_i . v_j - D_i),  dq_i = sum_j dS_ij k_j / sqrt(hd),
//   dk_j = sum_{h in group, i} dS_ij q_i / sqrt(hd),  dv_j = sum_{h in group, i} P_ij do_i
// Shapes: q, o, dout, dq [B*T, H*hd]; k, v, dk, dv [B*T, G*hd]; seq_ids [B*T]; lse, delta [B*H*T]
// indexed (b*H + h)*T + i. Key j is visible from query i when j <= i and seq_ids equal (packed samples).
// Memory: O(B * H * T) instead of O(B * H * T^2).
//
// Four implementations, same arguments:
//  * avx512 (kernels/attention_lse_avx512.cpp, kernels/avx512_attention_fp32.hpp): FlashAttention-2 on the
//    host fused per (sequence, kv head), every tile product on AVX-512 FMAs, scratch O(T * head_dim).
//    Host memory spaces and CPUs with AVX-512F, head_dim a multiple of 16 up to 256.
//  * tiled (kernels/attention_lse_tiled.cpp): FlashAttention-2 on the host, every tile product an
//    sgemm (kernels/gemm.hpp), scratch O(tile^2). Host memory spaces only (the CPU build).
//  * flash (kernels/attention_flash.hpp): FlashAttention-2 as Kokkos team kernels, tiles in team
//    scratch; any execution space (the GPU build's kernel).
//  * reference (kernels/attention_lse.cpp): one scalar Kokkos loop per query row (and per key row in
//    backward); runs in any memory space. Slow; tests compare the other two against it.
// attention_forward_lse / attention_backward_lse pick the avx512 kernel where it fits and the tiled one
// otherwise when the memory space is host-accessible, and the flash kernel elsewhere.
#include <string>

#include "kernels/attention.hpp"
#include "kernels/bf16.hpp"

namespace shardft {

// lse has B*H*T entries.
void attention_forward_lse(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                           Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<float> o,
                           Unmanaged1<float> lse);

// Overwrites dq, dk, dv. delta is scratch of B*H*T entries (it holds D on return).
void attention_backward_lse(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                            Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                            Unmanaged2<const float> o, Unmanaged1<const float> lse, Unmanaged2<const float> dout,
                            Unmanaged2<float> dq, Unmanaged2<float> dk, Unmanaged2<float> dv, Unmanaged1<float> delta);

// ---- the implementations, same arguments ------------------------------------------------------------
void attention_forward_lse_reference(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                     Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                     Unmanaged2<float> o, Unmanaged1<float> lse);
void attention_backward_lse_reference(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                      Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                      Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                      Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                      Unmanaged2<float> dv, Unmanaged1<float> delta);

// Host memory only. The avx512 kernel runs where attention_lse_avx512_fits (the build has it, the CPU has
// AVX-512F, and the head_dim suits it).
bool attention_lse_avx512_fits(const AttentionShape& s);
void attention_forward_lse_avx512(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                  Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                  Unmanaged2<float> o, Unmanaged1<float> lse);
void attention_backward_lse_avx512(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                   Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                   Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                   Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                   Unmanaged2<float> dv, Unmanaged1<float> delta);

// Which kernel attention_forward_lse / attention_backward_lse (bf16: their _bf16 forms) run in this build
// on this CPU for the head dimension: "fused on AVX-512 FMAs", "fused on AMX tiles", "host sgemm tiles",
// "the Kokkos flash kernel", ... (the start-up log's attention line).
std::string attention_lse_kernel_name(bool bf16, int head_dim);

// D = rowsum(dO o) per (b, h, i), indexed like lse (host memory): the first step of both host backwards.
void attention_lse_delta(const AttentionShape& s, Unmanaged2<const float> o, Unmanaged2<const float> dout,
                         Unmanaged1<float> delta);

// Tile sizes: queries x keys per sgemm tile. The defaults were tuned on one core (see the file comment
// of attention_lse_tiled.cpp); tests pass small tiles to reach every edge case.
struct AttentionTiles {
  int query_rows = 64;
  int key_cols = 128;
};

// bf16 q, k, v, o, dout (a bf16 step's activations) and bf16 outputs: the values the fp32 kernels give on
// the widened inputs, each output rounded once (kernels/attention_lse_bf16.cpp). On the host, fp32 scratch
// of a few [T, heads / kv_heads * head_dim] blocks instead of fp32 copies of every operand. Backward's dq,
// dk, dv may be q's, k's and v's own buffers (each kv-head group's operands are read before its gradients
// are written). q, k, v and dq, dk, dv may be column blocks of one wider array (Strided2: the [q | k | v]
// output of one projection GEMM, and its gradient); each row must be contiguous.
void attention_forward_lse_bf16(const AttentionShape& s, Strided2<const bf16> q, Strided2<const bf16> k,
                                Strided2<const bf16> v, Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<bf16> o,
                                Unmanaged1<float> lse);
void attention_backward_lse_bf16(const AttentionShape& s, Strided2<const bf16> q, Strided2<const bf16> k,
                                 Strided2<const bf16> v, Unmanaged1<const std::int32_t> seq_ids,
                                 Unmanaged2<const bf16> o, Unmanaged1<const float> lse, Unmanaged2<const bf16> dout,
                                 Strided2<bf16> dq, Strided2<bf16> dk, Strided2<bf16> dv, Unmanaged1<float> delta);

// Host memory only: the views' data must be host-accessible (the dispatchers above check it). The tiled
// backward also takes an empty o, with delta holding D on entry; add_into_dkv adds into dk and dv instead
// of overwriting them (in the order the whole group's call would: one query head's call after another
// gives the same bits).
// bf16 holds the bf16 values q, k, v and dout were widened from (the bf16 kernel's own operands): where
// set and the CPU has AMX tiles (kernels/amx_gemm_bf16.hpp), the tile products run on the tiles. The score
// products S = K Q^T and dP = V dO^T take those values themselves: exact products either way (bf16 x bf16
// fits a float) summed in fp32, only in another order than sgemm's. The three that take P or dS (O += P V,
// dV += P^T dO, dQ += dS K and dK += dS^T Q) take them rounded to bf16, as a GPU's flash kernel (cuDNN's,
// FlashAttention's) rounds them for its tensor cores; the softmax's sums use the unrounded P. The forward
// takes q, k and v; the backward all four (with one missing, those three products stay sgemm on fp32).
struct AttentionBf16Operands {
  const bf16 *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;
  std::int64_t ldq = 0, ldk = 0, ldv = 0, ldd = 0;  // row strides in elements
};
void attention_forward_lse_tiled(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                 Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                 Unmanaged2<float> o, Unmanaged1<float> lse, AttentionTiles tiles = {},
                                 const AttentionBf16Operands& bf16 = {});
void attention_backward_lse_tiled(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                  Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                  Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                  Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                  Unmanaged2<float> dv, Unmanaged1<float> delta, AttentionTiles tiles = {},
                                  bool add_into_dkv = false, const AttentionBf16Operands& bf16 = {});

}  // namespace shardft
