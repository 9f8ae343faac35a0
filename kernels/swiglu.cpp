#include "kernels/swiglu.hpp"
#include "kernels/math.hpp"

namespace shardft {

void swiglu_forward(Unmanaged2<const float> g, Unmanaged2<const float> u, Unmanaged2<float> s) {
  const int cols = static_cast<int>(g.extent(1));
  Kokkos::parallel_for(
      "swiglu_forward", Range(0, g.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        for (int j = 0; j < cols; ++j) {
          const float x = g(n, j);
          s(n, j) = x / (1.f + kmath::exp(-x)) * u(n, j);
        }
      });
}

void swiglu_backward(Unmanaged2<const float> g, Unmanaged2<const float> u, Unmanaged2<const float> ds,
                     Unmanaged2<float> dg, Unmanaged2<float> du) {
  const int cols = static_cast<int>(g.extent(1));
  Kokkos::parallel_for(
      "swiglu_backward", Range(0, g.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        for (int j = 0; j < cols; ++j) {
          const float x = g(n, j);
          const float sig = 1.f / (1.f + kmath::exp(-x));
          du(n, j) = ds(n, j) * x * sig;
          dg(n, j) = ds(n, j) * u(n, j) * sig * (1.f + x * (1.f - sig));
        }
      });
}

}  // namespace shardft

namespace shardft {

void swiglu_forward_packed(Unmanaged2<const float> gu, Unmanaged2<float> s) {
  const int cols = static_cast<int>(s.extent(1));
  Kokkos::parallel_for(
      "swiglu_forward_packed", Range(0, s.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        const float* g = &gu(n, 0);
        const float* u = g + cols;
        float* out = &s(n, 0);
        for (int j = 0; j < cols; ++j) out[j] = g[j] / (1.f + kmath::exp(-g[j])) * u[j];
      });
}

void swiglu_backward_packed_inplace(Unmanaged2<float> gu, Unmanaged2<const float> ds) {
  const int cols = static_cast<int>(ds.extent(1));
  Kokkos::parallel_for(
      "swiglu_backward_packed_inplace", Range(0, ds.extent(0)), KOKKOS_LAMBDA(const std::int64_t n) {
        float* g = &gu(n, 0);
        float* u = g + cols;
        const float* d = &ds(n, 0);
        for (int j = 0; j < cols; ++j) {
          const float x = g[j], up = u[j];
          const float sig = 1.f / (1.f + kmath::exp(-x));
          u[j] = d[j] * x * sig;
          g[j] = d[j] * up * sig * (1.f + x * (1.f - sig));
        }
      });
}

}  // namespace shardft
