#pragma once
// Memory-efficient causal GQA attention: same math as kernels/attention.hpp, but the [T,T] score
// matrix is never stored. Forward keeps per query row only the log-sum-exp of its scores,
//   lse[b,h,i] = log sum_{j visible} exp(S_ij),   o_i = sum_j exp(S_ij - lse_i) v_j
// (one pass with an online max and rescaled sum). Backward recomputes P_ij = exp(S_ij - lse_i) and
// uses D_i = do_i . o_i = sum_j P_ij dP_ij:
//   dS_ij = P_ij (do_i . v_j - D_i),  dq_i = sum_j dS_ij k_j / sqrt(hd),
//   dk_j = sum_{h in group, i} dS_ij q_i / sqrt(hd),  dv_j = sum_{h in group, i} P_ij do_i
// Memory: O(B * H * T) instead of O(B * H * T^2); compute: about twice the exact kernel's backward.
#include "kernels/attention.hpp"

namespace shardft {

// lse has B*H*T entries.
void attention_forward_lse(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                           Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<float> o,
                           Unmanaged1<float> lse);

// Overwrites dq, dk, dv. delta is scratch of B*H*T entries.
void attention_backward_lse(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                            Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                            Unmanaged2<const float> o, Unmanaged1<const float> lse, Unmanaged2<const float> dout,
                            Unmanaged2<float> dq, Unmanaged2<float> dk, Unmanaged2<float> dv, Unmanaged1<float> delta);

}  // namespace shardft
