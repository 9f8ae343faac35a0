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
