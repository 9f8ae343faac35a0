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

// One pass over x and dy: each block of rows updates its dx rows and writes its own partial dw row;
// the partials are then summed block by block in order (deterministic, no atomics). The column-wise
// dw pass this replaces read x and dy a second time with a stride of d.
void rmsnorm_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw) {
  const int d = static_cast<int>(x.extent(1));
  const std::int64_t rows = static_cast<std::int64_t>(x.extent(0));
  constexpr std::int64_t kRowsPerBlock = 64;
  const std::int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  View2<float> partial(Kokkos::view_alloc(Kokkos::WithoutInitializing, "rmsnorm_dw_partial"), blocks, d);
  Kokkos::parallel_for(
      "rmsnorm_backward_rows", Range(0, blocks), KOKKOS_LAMBDA(const std::int64_t b) {
        float* acc = &partial(b, 0);
        for (int j = 0; j < d; ++j) acc[j] = 0.f;
        const std::int64_t end = (b + 1) * kRowsPerBlock < rows ? (b + 1) * kRowsPerBlock : rows;
        for (std::int64_t n = b * kRowsPerBlock; n < end; ++n) {
          const float* xn = &x(n, 0);
          const float* dyn = &dy(n, 0);
          float* dxn = &dx(n, 0);
          float gx = 0.f;
          for (int j = 0; j < d; ++j) gx += dyn[j] * w(j) * xn[j];
          const float r = rstd(n);
          const float c = r * r * r * gx / d;
          for (int j = 0; j < d; ++j) {
            dxn[j] += r * dyn[j] * w(j) - c * xn[j];
            acc[j] += dyn[j] * xn[j] * r;
          }
        }
      });
  Kokkos::parallel_for(
      "rmsnorm_backward_dw", Range(0, d), KOKKOS_LAMBDA(const std::int64_t j) {
        float sum = 0.f;
        for (std::int64_t b = 0; b < blocks; ++b) sum += partial(b, j);
        dw(j) += sum;
      });
}

}  // namespace shardft
