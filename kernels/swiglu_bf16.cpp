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

// silu(g) * u in fp32 from the bf16 inputs, rounded once: forward's s, and backward's recompute of it.
KOKKOS_INLINE_FUNCTION bf16 swiglu_of(float g, float u) { return bf16(g / (1.f + kmath::exp(-g)) * u); }
}  // namespace

void swiglu_forward_packed_bf16(Unmanaged2<const bf16> gu, Unmanaged2<bf16> s) {
  check(gu.extent(0), gu.extent(1), s.extent(0), s.extent(1), "swiglu_forward_packed_bf16");
  const std::int64_t cols = static_cast<std::int64_t>(s.extent(1));
  Kokkos::parallel_for(
      "swiglu_forward_packed_bf16", Range(0, static_cast<std::int64_t>(s.extent(0)) * cols),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t n = idx / cols, j = idx - n * cols;
        const float g = bf16::to_float(gu(n, j).bits), u = bf16::to_float(gu(n, cols + j).bits);
        s(n, j) = swiglu_of(g, u);
      });
}

void swiglu_backward_packed_bf16(Unmanaged2<bf16> gu, Unmanaged2<const bf16> ds, Unmanaged2<bf16> s) {
  check(gu.extent(0), gu.extent(1), ds.extent(0), ds.extent(1), "swiglu_backward_packed_bf16");
  check(gu.extent(0), gu.extent(1), s.extent(0), s.extent(1), "swiglu_backward_packed_bf16");
  const std::int64_t cols = static_cast<std::int64_t>(ds.extent(1));
  Kokkos::parallel_for(
      "swiglu_backward_packed_bf16", Range(0, static_cast<std::int64_t>(ds.extent(0)) * cols),
      KOKKOS_LAMBDA(const std::int64_t idx) {
        const std::int64_t n = idx / cols, j = idx - n * cols;
        const float x = bf16::to_float(gu(n, j).bits), up = bf16::to_float(gu(n, cols + j).bits);
        const float d = bf16::to_float(ds(n, j).bits);
        const float sig = 1.f / (1.f + kmath::exp(-x));
        s(n, j) = swiglu_of(x, up);
        gu(n, cols + j) = bf16(d * x * sig);
        gu(n, j) = bf16(d * up * sig * (1.f + x * (1.f - sig)));
      });
}

}  // namespace shardft
