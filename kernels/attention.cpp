#include "kernels/attention.hpp"

#include <cmath>

#include "kernels/math.hpp"

namespace shardft {

void attention_forward(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                       Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<float> o,
                       Unmanaged1<float> probs) {
  const int T = s.seq, H = s.heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  Kokkos::parallel_for(
      "attention_forward", Range(0, static_cast<std::int64_t>(s.batch) * H * T), KOKKOS_LAMBDA(const std::int64_t idx) {
        const int i = static_cast<int>(idx % T);
        const int h = static_cast<int>((idx / T) % H);
        const std::int64_t b = idx / (static_cast<std::int64_t>(T) * H);
        const int g = h / group;
        const std::int64_t row = b * T + i;
        float* p = &probs(idx * T);
        const float* qi = &q(row, h * hd);
        float mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          if (seq_ids(b * T + j) != seq_ids(row)) continue;
          const float* kj = &k(b * T + j, g * hd);
          float dot = 0.f;
          for (int e = 0; e < hd; ++e) dot += qi[e] * kj[e];
          p[j] = dot * scale;
          mx = p[j] > mx ? p[j] : mx;
        }
        float sum = 0.f;
        for (int j = 0; j < T; ++j) {
          const bool visible = j <= i && seq_ids(b * T + j) == seq_ids(row);
          p[j] = visible ? kmath::exp(p[j] - mx) : 0.f;
          sum += p[j];
        }
        const float inv = 1.f / sum;
        float* oi = &o(row, h * hd);
        for (int e = 0; e < hd; ++e) oi[e] = 0.f;
        for (int j = 0; j <= i; ++j) {
          p[j] *= inv;
          if (p[j] == 0.f) continue;
          const float* vj = &v(b * T + j, g * hd);
          for (int e = 0; e < hd; ++e) oi[e] += p[j] * vj[e];
        }
      });
}

void attention_backward(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                        Unmanaged2<const float> v, Unmanaged1<const float> probs, Unmanaged2<const float> dout,
                        Unmanaged2<float> dq, Unmanaged2<float> dk, Unmanaged2<float> dv, Unmanaged1<float> dscores) {
  const int T = s.seq, H = s.heads, G = s.kv_heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  // Pass 1, one query row at a time: dS and dq.
  Kokkos::parallel_for(
      "attention_backward_dq", Range(0, static_cast<std::int64_t>(s.batch) * H * T),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const int i = static_cast<int>(idx % T);
        const int h = static_cast<int>((idx / T) % H);
        const std::int64_t b = idx / (static_cast<std::int64_t>(T) * H);
        const int g = h / group;
        const std::int64_t row = b * T + i;
        const float* p = &probs(idx * T);
        float* ds = &dscores(idx * T);
        const float* doi = &dout(row, h * hd);
        float pdp = 0.f;
        for (int j = 0; j <= i; ++j) {
          float dp = 0.f;
          if (p[j] != 0.f) {
            const float* vj = &v(b * T + j, g * hd);
            for (int e = 0; e < hd; ++e) dp += doi[e] * vj[e];
          }
          ds[j] = dp;
          pdp += p[j] * dp;
        }
        float* dqi = &dq(row, h * hd);
        for (int e = 0; e < hd; ++e) dqi[e] = 0.f;
        for (int j = 0; j < T; ++j) {
          ds[j] = j <= i ? p[j] * (ds[j] - pdp) : 0.f;
          if (ds[j] == 0.f) continue;
          const float* kj = &k(b * T + j, g * hd);
          for (int e = 0; e < hd; ++e) dqi[e] += scale * ds[j] * kj[e];
        }
      });
  // Pass 2, one key row per kv head: dk and dv gather over the query heads of the group.
  Kokkos::parallel_for(
      "attention_backward_dkv", Range(0, static_cast<std::int64_t>(s.batch) * G * T),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const int j = static_cast<int>(idx % T);
        const int g = static_cast<int>((idx / T) % G);
        const std::int64_t b = idx / (static_cast<std::int64_t>(T) * G);
        const std::int64_t row = b * T + j;
        float* dkj = &dk(row, g * hd);
        float* dvj = &dv(row, g * hd);
        for (int e = 0; e < hd; ++e) dkj[e] = dvj[e] = 0.f;
        for (int h = g * group; h < (g + 1) * group; ++h) {
          const std::int64_t base = ((b * H + h) * T) * T;
          for (int i = j; i < T; ++i) {
            const float pij = probs(base + static_cast<std::int64_t>(i) * T + j);
            const float dsij = dscores(base + static_cast<std::int64_t>(i) * T + j);
            if (pij == 0.f && dsij == 0.f) continue;
            const float* qi = &q(b * T + i, h * hd);
            const float* doi = &dout(b * T + i, h * hd);
            for (int e = 0; e < hd; ++e) {
              dkj[e] += scale * dsij * qi[e];
              dvj[e] += pij * doi[e];
            }
          }
        }
      });
}

}  // namespace shardft
