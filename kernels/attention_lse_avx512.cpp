// The fp32 memory-efficient attention on the fused AVX-512 kernels (kernels/avx512_attention_fp32.hpp):
// one call per (sequence, kv head) group over the views' host pointers. Math and shapes:
// kernels/attention_lse.hpp.
#include "kernels/attention_lse.hpp"
#include "kernels/attention_lse_groups.hpp"
#include "kernels/avx512_attention_fp32.hpp"

namespace shardft {

bool attention_lse_avx512_fits(const AttentionShape& s) { return avx512::attention_fits(s.head_dim); }

void attention_forward_lse_avx512(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                  Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                  Unmanaged2<float> o, Unmanaged1<float> lse) {
  attention_groups::forward_each_group<float>(s, q, k, v, seq_ids.data(), o, lse.data(), &avx512::attention_forward);
}

void attention_backward_lse_avx512(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                   Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                   Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                   Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                   Unmanaged2<float> dv, Unmanaged1<float> delta) {
  attention_lse_delta(s, o, dout, delta);
  attention_groups::backward_each_group<float>(s, q, k, v, seq_ids.data(), dout, lse.data(), delta.data(), dq, dk, dv,
                                               &avx512::attention_backward);
}

}  // namespace shardft
