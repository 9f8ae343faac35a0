// The fp32 memory-efficient attention on the fused AVX-512 kernels (kernels/avx512_attention_fp32.hpp):
// one call per (sequence, kv head) group over the views' host pointers. Math and shapes:
// kernels/attention_lse.hpp.
#include "kernels/attention_lse.hpp"
#include "kernels/attention_lse_groups.hpp"
#include "kernels/avx512_attention_fp32.hpp"

namespace shardft {

namespace {

using attention_groups::first_stat;

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
  const std::int64_t hd = s.head_dim, group = s.heads / s.kv_heads, ldo = static_cast<std::int64_t>(o.stride_0());
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) {
      const std::int64_t row0 = static_cast<std::int64_t>(b) * s.seq;
      avx512::attention_forward(group_of(s, q, k, v, seq_ids, b, g), o.data() + row0 * ldo + g * group * hd, ldo,
                                lse.data() + first_stat(s, b, g), s.seq);
    }
  }
}

void attention_backward_lse_avx512(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                   Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                   Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                   Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                   Unmanaged2<float> dv, Unmanaged1<float> delta) {
  attention_lse_delta(s, o, dout, delta);
  const std::int64_t hd = s.head_dim, group = s.heads / s.kv_heads;
  const std::int64_t ldd = static_cast<std::int64_t>(dout.stride_0()), lddq = static_cast<std::int64_t>(dq.stride_0());
  const std::int64_t lddk = static_cast<std::int64_t>(dk.stride_0()), lddv = static_cast<std::int64_t>(dv.stride_0());
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) {
      const std::int64_t row0 = static_cast<std::int64_t>(b) * s.seq, first = first_stat(s, b, g);
      avx512::attention_backward(group_of(s, q, k, v, seq_ids, b, g), dout.data() + row0 * ldd + g * group * hd, ldd,
                                 lse.data() + first, delta.data() + first, s.seq,
                                 dq.data() + row0 * lddq + g * group * hd, lddq, dk.data() + row0 * lddk + g * hd,
                                 lddk, dv.data() + row0 * lddv + g * hd, lddv);
    }
  }
}

}  // namespace shardft
