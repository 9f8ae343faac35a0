#include "kernels/rmsnorm.hpp"
#include "kernels/math.hpp"

namespace shardft {

void rmsnorm_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, float eps, Unmanaged2<float> y,
                     Unmanaged1<float> rstd) {
  const int d = static_cast<int>(x.extent(1));
  Kokkos::parallel_for(
      "rmsnorm_forward", Range(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        float ss = 0.f;
        for (int j = 0; j < d; ++j) ss += x(n, j) * x(n, j);
        const float r = 1.f / kmath::sqrt(ss / d + eps);
        rstd(n) = r;
        for (int j = 0; j < d; ++j) y(n, j) = w(j) * (x(n, j) * r);
      });
}

void rmsnorm_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw) {
  const int d = static_cast<int>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  Kokkos::parallel_for(
      "rmsnorm_backward_dx", Range(0, rows), KOKKOS_LAMBDA(const std::int64_t n) {
        float gx = 0.f;
        for (int j = 0; j < d; ++j) gx += dy(n, j) * w(j) * x(n, j);
        const float r = rstd(n);
        const float c = r * r * r * gx / d;
        for (int j = 0; j < d; ++j) dx(n, j) += r * dy(n, j) * w(j) - c * x(n, j);
      });
  // Columns in parallel, rows in order: race-free and deterministic without atomics.
  Kokkos::parallel_for(
      "rmsnorm_backward_dw", Range(0, d), KOKKOS_LAMBDA(const std::int64_t j) {
        float acc = 0.f;
        for (std::int64_t n = 0; n < rows; ++n) acc += dy(n, j) * x(n, j) * rstd(n);
        dw(j) += acc;
      });
}

}  // namespace shardft
