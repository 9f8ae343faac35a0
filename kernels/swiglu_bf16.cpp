#include "kernels/swiglu_bf16.hpp"

#include <stdexcept>

#include "kernels/math.hpp"

namespace shardft {

namespace {
void check(std::size_t gu_rows, std::size_t gu_cols, std::size_t rows, std::size_t cols, const char* what) {
  if (gu_rows != rows || gu_cols != 2 * cols) {
    throw std::invalid_argument(std::string(what) + ": gu must be [N, 2I] for an [N, I] half");
  }
}
}  // namespace

void swiglu_forward_packed_bf16(Unmanaged2<const bf16> gu, Unmanaged2<bf16> s) {
  check(gu.extent(0), gu.extent(1), s.extent(0), s.extent(1), "swiglu_forward_packed_bf16");
  const std::int64_t cols = static_cast<std::int64_t>(s.extent(1));
  Kokkos::parallel_for(
      "swiglu_forward_packed_bf16", Range(0, static_cast<std::int64_t>(s.extent(0)) * cols),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t n = idx / cols, j = idx - n * cols;
        const float g = bf16::to_float(gu(n, j).bits), u = bf16::to_float(gu(n, cols + j).bits);
        s(n, j) = bf16(g / (1.f + kmath::exp(-g)) * u);
      });
}

void swiglu_backward_packed_bf16(Unmanaged2<const bf16> gu, Unmanaged2<const float> ds, Unmanaged2<bf16> dgu) {
  check(gu.extent(0), gu.extent(1), ds.extent(0), ds.extent(1), "swiglu_backward_packed_bf16");
  check(dgu.extent(0), dgu.extent(1), ds.extent(0), ds.extent(1), "swiglu_backward_packed_bf16");
  const std::int64_t cols = static_cast<std::int64_t>(ds.extent(1));
  Kokkos::parallel_for(
      "swiglu_backward_packed_bf16", Range(0, static_cast<std::int64_t>(ds.extent(0)) * cols),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t n = idx / cols, j = idx - n * cols;
        const float x = bf16::to_float(gu(n, j).bits), up = bf16::to_float(gu(n, cols + j).bits);
        const float d = ds(n, j);
        const float sig = 1.f / (1.f + kmath::exp(-x));
        dgu(n, cols + j) = bf16(d * x * sig);
        dgu(n, j) = bf16(d * up * sig * (1.f + x * (1.f - sig)));
      });
}

}  // namespace shardft
