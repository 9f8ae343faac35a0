// The fp32 memory-efficient attention on the fused AVX-512 kernels (kernels/avx512_attention_fp32.hpp):
// one call per (sequence, kv head) group over the views' host pointers. Math and shapes:
// kernels/attention_lse.hpp.
#include "kernels/attention_lse.hpp"
#include "kernels/attention_lse_groups.hpp"
#include "kernels/avx512_attention_fp32.hpp"

namespace shardft {

namespace {

using attention_groups::at;
using attention_groups::for_each_group;

// Group (b, g) of the fp32 views.
avx512::AttentionGroup group_of(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids, int b, int g) {
  return attention_groups::group_of<float>(s, q, k, v, seq_ids.data(), b, g);
}

}  // namespace

bool attention_lse_avx512_fits(const AttentionShape& s) { return avx512::attention_fits(s.head_dim); }

void attention_forward_lse_avx512(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                  Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                  Unmanaged2<float> o, Unmanaged1<float> lse) {
  const std::int64_t heads = s.heads / s.kv_heads * s.head_dim;  // a group's query columns
  for_each_group(s, [&](int b, int g, std::int64_t row0, std::int64_t first) {
    avx512::attention_forward(group_of(s, q, k, v, seq_ids, b, g), at(o, row0, g * heads),
                              static_cast<std::int64_t>(o.stride_0()), lse.data() + first, s.seq);
  });
}

void attention_backward_lse_avx512(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                   Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                   Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                   Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                   Unmanaged2<float> dv, Unmanaged1<float> delta) {
  attention_lse_delta(s, o, dout, delta);
  const std::int64_t heads = s.heads / s.kv_heads * s.head_dim, hd = s.head_dim;
  for_each_group(s, [&](int b, int g, std::int64_t row0, std::int64_t first) {
    avx512::attention_backward(group_of(s, q, k, v, seq_ids, b, g), at(dout, row0, g * heads),
                               static_cast<std::int64_t>(dout.stride_0()), lse.data() + first, delta.data() + first,
                               s.seq, at(dq, row0, g * heads), static_cast<std::int64_t>(dq.stride_0()),
                               at(dk, row0, g * hd), static_cast<std::int64_t>(dk.stride_0()), at(dv, row0, g * hd),
                               static_cast<std::int64_t>(dv.stride_0()));
  });
}

}  // namespace shardft
