#pragma once
// The (sequence, kv head) groups of an attention_lse call (kernels/attention_lse.hpp's shapes), as the
// host's fused kernels take them (kernels/attention_group.hpp): for the bf16 and the fp32 wrappers
// (kernels/attention_lse_bf16.cpp, kernels/attention_lse_avx512.cpp).
#include <cmath>
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/attention_group.hpp"
#include "kernels/bf16.hpp"

namespace shardft::attention_groups {

// An element's address as the fused kernels take it: fp32 as it is, bf16 as its bits.
inline const float* element(const float* p) { return p; }
inline float* element(float* p) { return p; }
inline const std::uint16_t* element(const bf16* p) { return &p->bits; }
inline std::uint16_t* element(bf16* p) { return &p->bits; }

// Group (b, g) of q, k, v (views of [B*T, H*hd] and [B*T, G*hd] rows): its rows, its kv head's columns and
// its query heads' columns.
template <class T, class View>
AttentionGroupOf<T> group_of(const AttentionShape& s, const View& q, const View& k, const View& v,
                             const std::int32_t* seq_ids, int b, int g) {
  const std::int64_t row0 = static_cast<std::int64_t>(b) * s.seq, hd = s.head_dim, group = s.heads / s.kv_heads;
  AttentionGroupOf<T> a;
  a.seq = s.seq;
  a.head_dim = s.head_dim;
  a.heads = static_cast<int>(group);
  a.scale = 1.f / std::sqrt(static_cast<float>(s.head_dim));
  a.seq_ids = seq_ids + row0;
  a.ldq = static_cast<std::int64_t>(q.stride_0());
  a.q = element(q.data() + row0 * a.ldq + g * group * hd);
  a.ldk = static_cast<std::int64_t>(k.stride_0());
  a.k = element(k.data() + row0 * a.ldk + g * hd);
  a.ldv = static_cast<std::int64_t>(v.stride_0());
  a.v = element(v.data() + row0 * a.ldv + g * hd);
  return a;
}

// lse and D [(b * H + h) * T + i]: group g's first head's run.
inline std::int64_t first_stat(const AttentionShape& s, int b, int g) {
  return (static_cast<std::int64_t>(b) * s.heads + static_cast<std::int64_t>(g) * (s.heads / s.kv_heads)) * s.seq;
}

}  // namespace shardft::attention_groups
