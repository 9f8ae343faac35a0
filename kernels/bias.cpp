#include "kernels/bias.hpp"

#include <stdexcept>

namespace shardft {

void bias_forward(Unmanaged2<float> y, Unmanaged1<const float> b) {
  if (b.extent(0) != y.extent(1)) throw std::invalid_argument("bias_forward: bias size does not match y's columns");
  const std::int64_t cols = static_cast<std::int64_t>(y.extent(1));
  // One thread per element: y[n,j] += b[j] with n = i / cols, j = i % cols.
  Kokkos::parallel_for(
      "bias_forward", Range(0, static_cast<std::int64_t>(y.extent(0)) * cols), KOKKOS_LAMBDA(const std::int64_t i) {
        y(i / cols, i % cols) += b(i % cols);
      });
}

void bias_backward(Unmanaged2<const float> dy, Unmanaged1<float> db) {
  if (db.extent(0) != dy.extent(1)) throw std::invalid_argument("bias_backward: bias size does not match dy's columns");
  const std::int64_t rows = static_cast<std::int64_t>(dy.extent(0));
  // Columns in parallel, rows in order: race-free and deterministic without atomics.
  Kokkos::parallel_for(
      "bias_backward", Range(0, static_cast<std::int64_t>(dy.extent(1))), KOKKOS_LAMBDA(const std::int64_t j) {
        float acc = 0.f;
        for (std::int64_t n = 0; n < rows; ++n) acc += dy(n, j);
        db(j) += acc;
      });
}

}  // namespace shardft
