#include "kernels/column_block.hpp"

#include <stdexcept>

namespace shardft {

namespace {
void check(std::size_t rows_a, std::size_t rows_b, std::int64_t col0, std::size_t w, std::size_t W, const char* what) {
  if (rows_a != rows_b || col0 < 0 || col0 + static_cast<std::int64_t>(w) > static_cast<std::int64_t>(W)) {
    throw std::invalid_argument(std::string(what) + ": the column block does not fit");
  }
}
}  // namespace

void add_column_block(Unmanaged2<const float> src, Unmanaged2<float> dst, std::int64_t col0) {
  check(src.extent(0), dst.extent(0), col0, src.extent(1), dst.extent(1), "add_column_block");
  const std::int64_t w = static_cast<std::int64_t>(src.extent(1));
  Kokkos::parallel_for(
      "add_column_block", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, LightLaunch>({0, 0}, {static_cast<std::int64_t>(src.extent(0)), w}),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t j) { dst(n, col0 + j) += src(n, j); });
}

void add_column_block(Unmanaged2<const float> src, Unmanaged2<bf16> dst, std::int64_t col0) {
  check(src.extent(0), dst.extent(0), col0, src.extent(1), dst.extent(1), "add_column_block");
  const std::int64_t w = static_cast<std::int64_t>(src.extent(1));
  Kokkos::parallel_for(
      "add_column_block_bf16", Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, LightLaunch>({0, 0}, {static_cast<std::int64_t>(src.extent(0)), w}),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t j) {
        dst(n, col0 + j) = bf16(static_cast<float>(dst(n, col0 + j)) + src(n, j));
      });
}

namespace {
template <class T>
void copy_columns(const char* name, Unmanaged2<const T> src, std::int64_t col0, Unmanaged2<T> dst) {
  check(src.extent(0), dst.extent(0), col0, dst.extent(1), src.extent(1), name);
  const std::int64_t w = static_cast<std::int64_t>(dst.extent(1));
  Kokkos::parallel_for(
      name, Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, LightLaunch>({0, 0}, {static_cast<std::int64_t>(dst.extent(0)), w}),
      KOKKOS_LAMBDA(const std::int64_t n, const std::int64_t j) { dst(n, j) = src(n, col0 + j); });
}
}  // namespace

void copy_column_block(Unmanaged2<const float> src, std::int64_t col0, Unmanaged2<float> dst) {
  copy_columns("copy_column_block", src, col0, dst);
}

void copy_column_block(Unmanaged2<const bf16> src, std::int64_t col0, Unmanaged2<bf16> dst) {
  copy_columns("copy_column_block_bf16", src, col0, dst);
}

}  // namespace shardft
