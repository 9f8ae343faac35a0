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

// Row `row`, column `col` of a view of rows, as the fused kernels take the address.
template <class View>
auto at(const View& x, std::int64_t row, std::int64_t col) {
  return raw_elements(x.data() + row * static_cast<std::int64_t>(x.stride_0()) + col);
}

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
  a.q = at(q, row0, g * group * hd);
  a.ldq = static_cast<std::int64_t>(q.stride_0());
  a.k = at(k, row0, g * hd);
  a.ldk = static_cast<std::int64_t>(k.stride_0());
  a.v = at(v, row0, g * hd);
  a.ldv = static_cast<std::int64_t>(v.stride_0());
  return a;
}

// lse and D [(b * H + h) * T + i]: group g's first head's run.
inline std::int64_t first_stat(const AttentionShape& s, int b, int g) {
  return (static_cast<std::int64_t>(b) * s.heads + static_cast<std::int64_t>(g) * (s.heads / s.kv_heads)) * s.seq;
}

// f(b, g, row0, first) for every (sequence b, kv head g) group, row0 its first row and first its first
// head's offset in lse and D.
template <class F>
void for_each_group(const AttentionShape& s, const F& f) {
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) f(b, g, static_cast<std::int64_t>(b) * s.seq, first_stat(s, b, g));
  }
}

// A fused forward over every group: forward(group, o, ldo, lse, lse_head), o at the group's first query
// column, lse at its first head's run (T per head). T is the element the kernel takes (float, or the
// bits of bf16).
template <class T, class View, class Out, class Forward>
void forward_each_group(const AttentionShape& s, const View& q, const View& k, const View& v,
                        const std::int32_t* seq_ids, const Out& o, float* lse, Forward forward) {
  const std::int64_t heads = s.heads / s.kv_heads * s.head_dim;  // a group's query columns
  for_each_group(s, [&](int b, int g, std::int64_t row0, std::int64_t first) {
    forward(group_of<T>(s, q, k, v, seq_ids, b, g), at(o, row0, g * heads), static_cast<std::int64_t>(o.stride_0()),
            lse + first, s.seq);
  });
}

// A fused backward over every group: backward(group, dout, ldd, lse, delta, stat_head, dq, lddq, dk, lddk,
// dv, lddv), dout and dq at the group's query columns, dk and dv at its kv head's.
template <class T, class View, class DOut, class Grad, class Backward>
void backward_each_group(const AttentionShape& s, const View& q, const View& k, const View& v,
                         const std::int32_t* seq_ids, const DOut& dout, const float* lse, const float* delta,
                         const Grad& dq, const Grad& dk, const Grad& dv, Backward backward) {
  const std::int64_t heads = s.heads / s.kv_heads * s.head_dim, hd = s.head_dim;
  for_each_group(s, [&](int b, int g, std::int64_t row0, std::int64_t first) {
    backward(group_of<T>(s, q, k, v, seq_ids, b, g), at(dout, row0, g * heads),
             static_cast<std::int64_t>(dout.stride_0()), lse + first, delta + first, s.seq, at(dq, row0, g * heads),
             static_cast<std::int64_t>(dq.stride_0()), at(dk, row0, g * hd), static_cast<std::int64_t>(dk.stride_0()),
             at(dv, row0, g * hd), static_cast<std::int64_t>(dv.stride_0()));
  });
}

}  // namespace shardft::attention_groups
