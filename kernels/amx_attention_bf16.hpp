#pragma once
// Causal attention on the CPU's AMX tiles, forward and backward fused per tile pair (FlashAttention-2's
// loop), for one sequence and one kv head's group of query heads: the host form of a bf16 step's fused
// attention (kernels/attention_lse.hpp's _bf16 entry points take it where it fits). bf16 operands, fp32
// scores, softmax and accumulators; P and dS rounded to bf16 where they feed a tile product (a GPU flash
// kernel's rounding points); each output rounded once.
//   forward, per query tile i, key tiles j up to the diagonal:  S = scale K_j Q_i^T (masked),
//     m' = max(m, colmax S), P = exp(S - m'), l = e^(m - m') l + colsum P, O_i = e^(m - m') O_i + P^T V_j;
//     o_i = O_i / l, lse_i = m + log l
//   backward, per key tile j, query tiles i from the diagonal:  P = exp(scale K_j Q_i^T - lse_i),
//     dV_j += P dO_i, dP = V_j dO_i^T, dS = P (dP - D_i), dK_j += scale dS Q_i, dQ_i += scale dS^T K_j
// (tiles held transposed: a row per key, a column per query). A key is visible from a query at or after it
// with the same sample id (packed samples).
#include <cstdint>

#include "kernels/attention_group.hpp"

namespace shardft::amx {

// One (sequence, kv head) group, values as bf16 bits (kernels/attention_group.hpp).
using AttentionGroup = AttentionGroupOf<std::uint16_t>;

// Whether these kernels take the head dimension (a multiple of 32 up to 256) and run here
// (amx::available()).
bool attention_fits(int head_dim);

// o for each query head (head h at o + h * head_dim, rows ldo apart) and lse (head h's at lse + h * lse_head).
void attention_forward(const AttentionGroup& g, std::uint16_t* o, std::int64_t ldo, float* lse, std::int64_t lse_head);

// dq per query head (laid out as q), dk and dv (as k and v) from dout (laid out as o) and the forward's lse
// and D = rowsum(dO o) (head h's at + h * stat_head). Every operand is read before a gradient is written
// over it, so dq, dk and dv may be q, k and v themselves.
void attention_backward(const AttentionGroup& g, const std::uint16_t* dout, std::int64_t ldd, const float* lse,
                        const float* delta, std::int64_t stat_head, std::uint16_t* dq, std::int64_t lddq,
                        std::uint16_t* dk, std::int64_t lddk, std::uint16_t* dv, std::int64_t lddv);

}  // namespace shardft::amx
