#pragma once
// Attention for generation with a KV cache: one new query per row over that row's cached keys and values.
//   q, o [R, H*hd]: row i's newest token (q after RoPE); cache k, v [S*max_len, G*hd]: cache row s holds
//   positions 0..max_len-1 at flat rows s*max_len + j (keys after RoPE); slot [R]: row i's cache row;
//   len [R]: positions of that cache row filled, the new token's included (its key and value are in)
//   S_j = (q_i . k_j) / sqrt(hd)  for j < len_i,   P = softmax_j(S),   o_i = sum_j P_j v_j
// Query head h reads kv head h / (H/G) (grouped-query attention). Causal by construction: the cache holds
// only the positions up to and including the query's own. The arithmetic (order of the sums, the max,
// exp and the normalisation) is attention_forward's for the last query of a row, so the logits equal a
// full forward's.
#include "kernels/types.hpp"

namespace shardft {

struct DecodeAttentionShape {
  int rows, heads, kv_heads, head_dim, max_len;
  std::int64_t scores_size() const { return static_cast<std::int64_t>(rows) * heads * max_len; }
};

// scores is scratch of scores_size().
void attention_decode(const DecodeAttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k_cache,
                      Unmanaged2<const float> v_cache, Unmanaged1<const std::int32_t> slot,
                      Unmanaged1<const std::int32_t> len, Unmanaged2<float> o, Unmanaged1<float> scores);

}  // namespace shardft
