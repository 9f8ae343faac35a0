// The dispatchers and the reference (scalar, any memory space) memory-efficient attention; the host
// kernels are in attention_lse_avx512.cpp and attention_lse_tiled.cpp. Math and shapes:
// kernels/attention_lse.hpp.
#include "kernels/attention_lse.hpp"

#include <cmath>

#include "kernels/amx_attention_bf16.hpp"
#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/attention_flash.hpp"
#include "kernels/math.hpp"
#include "kernels/striped_dot.hpp"

namespace shardft {

namespace {
KOKKOS_INLINE_FUNCTION float dot(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int e = 0; e < n; ++e) s += a[e] * b[e];
  return s;
}
}  // namespace

// The fused AVX-512 and the tiled kernels work on the views' pointers: host memory spaces only. Elsewhere
// (a GPU build) the Kokkos-team FlashAttention kernel runs.
constexpr bool kHostAttention = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;

void attention_forward_lse(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                           Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids, Unmanaged2<float> o,
                           Unmanaged1<float> lse) {
  if constexpr (kHostAttention) {
    if (attention_lse_avx512_fits(s)) return attention_forward_lse_avx512(s, q, k, v, seq_ids, o, lse);
    attention_forward_lse_tiled(s, q, k, v, seq_ids, o, lse);
  } else {
    attention_forward_lse_flash(s, q, k, v, seq_ids, o, lse);
  }
}

void attention_backward_lse(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                            Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                            Unmanaged2<const float> o, Unmanaged1<const float> lse, Unmanaged2<const float> dout,
                            Unmanaged2<float> dq, Unmanaged2<float> dk, Unmanaged2<float> dv, Unmanaged1<float> delta) {
  if constexpr (kHostAttention) {
    if (attention_lse_avx512_fits(s)) {
      return attention_backward_lse_avx512(s, q, k, v, seq_ids, o, lse, dout, dq, dk, dv, delta);
    }
    attention_backward_lse_tiled(s, q, k, v, seq_ids, o, lse, dout, dq, dk, dv, delta);
  } else {
    attention_backward_lse_flash(s, q, k, v, seq_ids, o, lse, dout, dq, dk, dv, delta);
  }
}

std::string attention_lse_kernel_name(bool bf16, int head_dim) {
  if constexpr (!kHostAttention) {
    return "the Kokkos flash kernel";
  } else if (bf16) {
    if (amx::attention_fits(head_dim)) return "fused on AMX tiles";
    return amx::available() ? "host tiles on AMX" : "host sgemm tiles on widened blocks";
  } else {
    return attention_lse_avx512_fits({1, 1, 1, 1, head_dim}) ? "fused on AVX-512 FMAs" : "host sgemm tiles";
  }
}

void attention_lse_delta(const AttentionShape& s, Unmanaged2<const float> o, Unmanaged2<const float> dout,
                         Unmanaged1<float> delta) {
  const int T = s.seq, H = s.heads, hd = s.head_dim;
  const std::int64_t ldo = o.stride_0(), ldd = dout.stride_0();
  // Row by row, so o and dout are read in memory order (a head's rows lie H * head_dim floats apart).
  for (int b = 0; b < s.batch; ++b) {
    for (int i = 0; i < T; ++i) {
      const std::int64_t row = static_cast<std::int64_t>(b) * T + i;
      for (int h = 0; h < H; ++h) {
        const float* doi = dout.data() + row * ldd + h * hd;
        const float* oi = o.data() + row * ldo + h * hd;
        delta((static_cast<std::int64_t>(b) * H + h) * T + i) = striped_dot(doi, oi, hd);
      }
    }
  }
}

void attention_forward_lse_reference(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                     Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                     Unmanaged2<float> o, Unmanaged1<float> lse) {
  const int T = s.seq, H = s.heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  Kokkos::parallel_for(
      "attention_forward_lse_reference", Range(0, static_cast<std::int64_t>(s.batch) * H * T), KOKKOS_LAMBDA(const std::int64_t idx) {
        const int i = static_cast<int>(idx % T);
        const int h = static_cast<int>((idx / T) % H);
        const std::int64_t b = idx / (static_cast<std::int64_t>(T) * H);
        const int g = h / group;
        const std::int64_t row = b * T + i;
        const float* qi = &q(row, h * hd);
        float* oi = &o(row, h * hd);
        for (int e = 0; e < hd; ++e) oi[e] = 0.f;
        // Online softmax: running max m and sum l, the output rescaled whenever m grows.
        float m = -INFINITY, l = 0.f;
        for (int j = 0; j <= i; ++j) {
          if (seq_ids(b * T + j) != seq_ids(row)) continue;
          const float sij = dot(qi, &k(b * T + j, g * hd), hd) * scale;
          const float m_new = sij > m ? sij : m;
          const float correction = kmath::exp(m - m_new), p = kmath::exp(sij - m_new);
          l = l * correction + p;
          const float* vj = &v(b * T + j, g * hd);
          for (int e = 0; e < hd; ++e) oi[e] = oi[e] * correction + p * vj[e];
          m = m_new;
        }
        const float inv = 1.f / l;
        for (int e = 0; e < hd; ++e) oi[e] *= inv;
        lse(idx) = m + kmath::log(l);
      });
}

void attention_backward_lse_reference(const AttentionShape& s, Unmanaged2<const float> q, Unmanaged2<const float> k,
                                      Unmanaged2<const float> v, Unmanaged1<const std::int32_t> seq_ids,
                                      Unmanaged2<const float> o, Unmanaged1<const float> lse,
                                      Unmanaged2<const float> dout, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                      Unmanaged2<float> dv, Unmanaged1<float> delta) {
  const int T = s.seq, H = s.heads, G = s.kv_heads, hd = s.head_dim, group = s.heads / s.kv_heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(hd));
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * H * T;
  // D_i = do_i . o_i, then dq row by row.
  Kokkos::parallel_for(
      "attention_backward_lse_reference_dq", Range(0, rows), KOKKOS_LAMBDA(const std::int64_t idx) {
        const int i = static_cast<int>(idx % T);
        const int h = static_cast<int>((idx / T) % H);
        const std::int64_t b = idx / (static_cast<std::int64_t>(T) * H);
        const int g = h / group;
        const std::int64_t row = b * T + i;
        const float* qi = &q(row, h * hd);
        const float* doi = &dout(row, h * hd);
        const float di = dot(doi, &o(row, h * hd), hd);
        delta(idx) = di;
        float* dqi = &dq(row, h * hd);
        for (int e = 0; e < hd; ++e) dqi[e] = 0.f;
        for (int j = 0; j <= i; ++j) {
          if (seq_ids(b * T + j) != seq_ids(row)) continue;
          const float* kj = &k(b * T + j, g * hd);
          const float p = kmath::exp(dot(qi, kj, hd) * scale - lse(idx));
          const float ds = p * (dot(doi, &v(b * T + j, g * hd), hd) - di);
          for (int e = 0; e < hd; ++e) dqi[e] += scale * ds * kj[e];
        }
      });
  // dk and dv key row by key row, over the query heads that share the kv head.
  Kokkos::parallel_for(
      "attention_backward_lse_reference_dkv", Range(0, static_cast<std::int64_t>(s.batch) * G * T),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const int j = static_cast<int>(idx % T);
        const int g = static_cast<int>((idx / T) % G);
        const std::int64_t b = idx / (static_cast<std::int64_t>(T) * G);
        const std::int64_t krow = b * T + j;
        const float* kj = &k(krow, g * hd);
        const float* vj = &v(krow, g * hd);
        float* dkj = &dk(krow, g * hd);
        float* dvj = &dv(krow, g * hd);
        for (int e = 0; e < hd; ++e) dkj[e] = dvj[e] = 0.f;
        for (int h = g * group; h < (g + 1) * group; ++h) {
          for (int i = j; i < T; ++i) {
            const std::int64_t row = b * T + i;
            if (seq_ids(row) != seq_ids(krow)) continue;
            const std::int64_t qidx = (b * H + h) * T + i;
            const float* qi = &q(row, h * hd);
            const float* doi = &dout(row, h * hd);
            const float p = kmath::exp(dot(qi, kj, hd) * scale - lse(qidx));
            const float ds = p * (dot(doi, vj, hd) - delta(qidx));
            for (int e = 0; e < hd; ++e) {
              dkj[e] += scale * ds * qi[e];
              dvj[e] += p * doi[e];
            }
          }
        }
      });
}

}  // namespace shardft
