#pragma once
// Causal attention with fp32 operands on the CPU's AVX-512 FMAs, forward and backward fused per tile pair
// (FlashAttention-2's loop) for one sequence and one kv head's group of query heads: the host form of the
// fp32 step's memory-efficient attention (kernels/attention_lse.hpp's dispatchers take it where it fits).
// The math is attention_lse.hpp's; the loop and the tiles are kernels/amx_attention_bf16.hpp's (64 queries x
// 64 keys, scores held transposed, a row per key and a column per query), with every product in fp32:
//   forward, per query tile i, key tiles j up to the diagonal:  S = K_j Q_i^T (masked),
//     m' = max(m, colmax scale S), P = exp(scale S - m'), l = e^(m - m') l + colsum P,
//     O_i^T = e^(m - m') O_i^T + V_j^T P;  o_i = O_i / l, lse_i = m + log l
//   backward, per key tile j, query tiles i from the diagonal:  P = exp(scale K_j Q_i^T - lse_i),
//     dV_j += P dO_i, dP = V_j dO_i^T, dS = P (dP - D_i), dK_j += dS Q_i, dQ_i += dS^T K_j
//     (dK and dQ scaled once at the end)
// A key is visible from a query at or after it with the same sample id (packed samples).
#include <cstdint>

#include "kernels/attention_group.hpp"

namespace shardft::avx512 {

// One (sequence, kv head) group, fp32 values (kernels/attention_group.hpp).
using AttentionGroup = AttentionGroupOf<float>;

// Whether these kernels take the head dimension (a multiple of 16 up to 256) and run here (AVX-512F).
bool attention_fits(int head_dim);

// o for each query head (head h at o + h * head_dim, rows ldo apart) and lse (head h's at lse + h * lse_head).
void attention_forward(const AttentionGroup& g, float* o, std::int64_t ldo, float* lse, std::int64_t lse_head);

// dq per query head (laid out as q), dk and dv (as k and v) from dout (laid out as o) and the forward's lse
// and D = rowsum(dO o) (head h's at + h * stat_head); dq, dk and dv overwritten.
void attention_backward(const AttentionGroup& g, const float* dout, std::int64_t ldd, const float* lse,
                        const float* delta, std::int64_t stat_head, float* dq, std::int64_t lddq, float* dk,
                        std::int64_t lddk, float* dv, std::int64_t lddv);

}  // namespace shardft::avx512
