#include "kernels/attention_decode.hpp"

#include <cmath>
#include <stdexcept>

#include "kernels/math.hpp"

namespace shardft {

void attention_decode(const DecodeAttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k_cache,
                      Unmanaged2<const float> v_cache, Unmanaged1<const std::int32_t> slot,
                      Unmanaged1<const std::int32_t> len, Unmanaged2<float> o, Unmanaged1<float> scores) {
  const int H = s.heads, hd = s.head_dim, L = s.max_len, group = s.heads / s.kv_heads;
  const std::int64_t qd = static_cast<std::int64_t>(H) * hd, kvd = static_cast<std::int64_t>(s.kv_heads) * hd;
  if (static_cast<std::int64_t>(q.extent(0)) != s.rows || static_cast<std::int64_t>(q.extent(1)) != qd ||
      o.extent(0) != q.extent(0) || o.extent(1) != q.extent(1) || static_cast<std::int64_t>(k_cache.extent(1)) != kvd ||
      v_cache.extent(0) != k_cache.extent(0) || v_cache.extent(1) != k_cache.extent(1) ||
      static_cast<std::int64_t>(slot.extent(0)) != s.rows || len.extent(0) != slot.extent(0) ||
      static_cast<std::int64_t>(scores.extent(0)) < s.scores_size()) {
    throw std::invalid_argument("attention_decode: shapes do not match");
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));  // as attention_forward computes it
  Kokkos::parallel_for(
      "attention_decode", Range(0, static_cast<std::int64_t>(s.rows) * H), KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t i = idx / H;
        const int h = static_cast<int>(idx % H);
        const int g = h / group;
        const std::int64_t base = static_cast<std::int64_t>(slot(i)) * L;  // the row's position 0 in the cache
        const int n = len(i);
        float* p = &scores(idx * L);
        const float* qi = &q(i, h * hd);
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          const float* kj = &k_cache(base + j, g * hd);
          float dot = 0.f;
          for (int e = 0; e < hd; ++e) dot += qi[e] * kj[e];
          p[j] = dot * scale;
          mx = p[j] > mx ? p[j] : mx;
        }
        float sum = 0.f;
        for (int j = 0; j < n; ++j) {
          p[j] = kmath::exp(p[j] - mx);
          sum += p[j];
        }
        const float inv = 1.f / sum;
        float* oi = &o(i, h * hd);
        for (int e = 0; e < hd; ++e) oi[e] = 0.f;
        for (int j = 0; j < n; ++j) {
          p[j] *= inv;
          if (p[j] == 0.f) continue;
          const float* vj = &v_cache(base + j, g * hd);
          for (int e = 0; e < hd; ++e) oi[e] += p[j] * vj[e];
        }
      });
}

}  // namespace shardft
