#pragma once
// Exact causal grouped-query attention (the memory-efficient tiled version comes later).
//   q [B*T, H*hd], k,v [B*T, G*hd] (G kv heads, each shared by H/G query heads), seq_ids [B*T]
//   S[b,h,i,j] = (q_i . k_j) / sqrt(hd)  for j <= i with seq_ids equal (same packed sample), else masked
//   P = softmax_j(S),   o_i = sum_j P[b,h,i,j] v_j               o [B*T, H*hd], P saved [B,H,T,T]
// Backward, with dP_ij = do_i . v_j and dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik):
//   dq_i = sum_j dS_ij k_j / sqrt(hd),   dk_j = sum_{h in group} sum_i dS_ij q_i / sqrt(hd),
//   dv_j = sum_{h in group} sum_i P_ij do_i
#include "kernels/types.hpp"

namespace shardft {

struct AttentionShape {
  int batch, seq, heads, kv_heads, head_dim;
  // The fused kernels' backward (kernels/attention_fused.hpp): reproducible bit for bit, or cuDNN's
  // faster form that adds dq with fp32 atomics. The other kernels are deterministic either way.
  bool deterministic_backward = true;
  std::int64_t probs_size() const { return static_cast<std::int64_t>(batch) * heads * seq * seq; }
};

void attention_forward(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                       Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<float> o,
                       Unmanaged1<float> probs);

// Overwrites dq, dk, dv. dscores is scratch of probs_size().
void attention_backward(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                        Unmanaged2<const float> v, Unmanaged1<const float> probs, Unmanaged2<const float> dout,
                        Unmanaged2<float> dq, Unmanaged2<float> dk, Unmanaged2<float> dv, Unmanaged1<float> dscores);

}  // namespace shardft
