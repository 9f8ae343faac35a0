#include "kernels/rope.hpp"
#include "kernels/math.hpp"

#include <cmath>

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
