#include "kernels/rope.hpp"
#include "kernels/math.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace shardft {

namespace {
// sign = +1 rotates by +a (forward), -1 by -a (backward).
void rope_rotate(const char* name, Unmanaged2<float> x, Unmanaged1<const std::int32_t> pos, int head_dim,
                 double theta, double sign) {
  const int half = head_dim / 2;
  const int heads = static_cast<int>(x.extent(1)) / head_dim;
  const double log_theta = std::log(theta);
  Kokkos::parallel_for(
      name, Range(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        const double p = pos(n);
        for (int i = 0; i < half; ++i) {
          const double a = p * kmath::exp(-log_theta * (2.0 * i) / head_dim);
          const float c = static_cast<float>(kmath::cos(a));
          const float s = static_cast<float>(sign * kmath::sin(a));
          for (int h = 0; h < heads; ++h) {
            float* v = &x(n, h * head_dim);
            const float x1 = v[i], x2 = v[i + half];
            v[i] = x1 * c - x2 * s;
            v[i + half] = x2 * c + x1 * s;
          }
        }
      });
}
}  // namespace

void rope_forward(Unmanaged2<float> x, Unmanaged1<const std::int32_t> pos, int head_dim, double theta) {
  rope_rotate("rope_forward", x, pos, head_dim, theta, 1.0);
}

void rope_backward(Unmanaged2<float> dx, Unmanaged1<const std::int32_t> pos, int head_dim, double theta) {
  rope_rotate("rope_backward", dx, pos, head_dim, theta, -1.0);
}

}  // namespace shardft

namespace shardft {

RopeTable make_rope_table(std::int64_t positions, int head_dim, double theta) {
  const int half = head_dim / 2;
  RopeTable t{View2<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "rope_cos"), positions, half),
              View2<float>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "rope_sin"), positions, half), head_dim,
              theta};
  const double log_theta = std::log(theta);
  auto c = t.cos, s = t.sin;
  Kokkos::parallel_for(
      "rope_table", Range(0, positions), KOKKOS_LAMBDA(const std::int64_t p) {
        for (int i = 0; i < half; ++i) {
          const double a = static_cast<double>(p) * kmath::exp(-log_theta * (2.0 * i) / head_dim);
          c(p, i) = static_cast<float>(kmath::cos(a));
          s(p, i) = static_cast<float>(kmath::sin(a));
        }
      });
  return t;
}

constexpr int kMaxRopeHalf = 256;  // head_dim up to 512

void rope_rotate_qk(Unmanaged2<float> q, Unmanaged2<float> k, Unmanaged1<const std::int32_t> pos,
                    const RopeTable& table, bool inverse) {
  const int hd = table.head_dim, half = hd / 2;
  const int q_heads = static_cast<int>(q.extent(1)) / hd, k_heads = static_cast<int>(k.extent(1)) / hd;
  const std::int64_t positions = static_cast<std::int64_t>(table.cos.extent(0));
  const double log_theta = std::log(table.theta);
  const float sign = inverse ? -1.f : 1.f;
  auto ct = table.cos, st = table.sin;
  if (half > kMaxRopeHalf) throw std::invalid_argument("rope_rotate_qk: head_dim above " + std::to_string(2 * kMaxRopeHalf));
  Kokkos::parallel_for(
      "rope_rotate_qk", Range(0, q.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        const std::int64_t p = pos(n);
        float c[kMaxRopeHalf], s[kMaxRopeHalf];
        for (int i = 0; i < half; ++i) {
          if (p >= 0 && p < positions) {
            c[i] = ct(p, i);
            s[i] = sign * st(p, i);
          } else {
            const double a = static_cast<double>(p) * kmath::exp(-log_theta * (2.0 * i) / hd);
            c[i] = static_cast<float>(kmath::cos(a));
            s[i] = sign * static_cast<float>(kmath::sin(a));
          }
        }
        // Head by head, the pair loop runs over contiguous memory and vectorises.
        auto rotate = [&](float* v) {
          for (int i = 0; i < half; ++i) {
            const float x1 = v[i], x2 = v[i + half];
            v[i] = x1 * c[i] - x2 * s[i];
            v[i + half] = x2 * c[i] + x1 * s[i];
          }
        };
        for (int h = 0; h < q_heads; ++h) rotate(&q(n, h * hd));
        for (int h = 0; h < k_heads; ++h) rotate(&k(n, h * hd));
      });
}

}  // namespace shardft
