#include "kernels/elementwise.hpp"
#include "kernels/math.hpp"

#include "kernels/bf16.hpp"

namespace shardft {

void add_inplace(Unmanaged1<float> y, Unmanaged1<const float> x) {
  Kokkos::parallel_for("add_inplace", Range(0, y.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { y(i) += x(i); });
}

void scale_inplace(Unmanaged1<float> x, float c) {
  Kokkos::parallel_for("scale_inplace", Range(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { x(i) *= c; });
}

double sum_squares(Unmanaged1<const float> x) {
  double s = 0.0;
  Kokkos::parallel_reduce(
      "sum_squares", Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i, double& acc) { acc += static_cast<double>(x(i)) * x(i); }, s);
  return s;
}

void round_to_bf16(Unmanaged1<const float> src, Unmanaged1<float> dst) {
  Kokkos::parallel_for(
      "round_to_bf16", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = round_to_bf16(src(i)); });
}

bool all_finite(Unmanaged1<const float> x) {
  std::int64_t bad = 0;
  Kokkos::parallel_reduce(
      "all_finite", Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& acc) { acc += kmath::isfinite(x(i)) ? 0 : 1; }, bad);
  return bad == 0;
}

}  // namespace shardft
