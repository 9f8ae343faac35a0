#pragma once
// Test values in bf16: host vectors rounded to bf16's values, device copies stored as bf16, widened back
// to the host, and a scope that sets the bf16 GEMM's tile size (kernels/gemm.hpp) and restores it.
#include <cstdint>
#include <string>
#include <vector>

#include <Kokkos_Core.hpp>

#include "kernels/bf16.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"

namespace shardft {
namespace testing_util {

inline std::vector<float> rounded_to_bf16(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

inline View2<bf16> to_device_bf16(const std::vector<float>& host, std::size_t rows, std::size_t cols,
                                  const char* label) {
  View1<float> f(std::string(label) + "_f32", host.size());
  Kokkos::deep_copy(f, Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(host.data(), host.size()));
  View2<bf16> out(std::string(label), rows, cols);
  to_bf16(Unmanaged1<const float>(f.data(), rows * cols), Unmanaged1<bf16>(out.data(), rows * cols));
  return out;
}

// A bf16 view's values on the host (any bf16 view: owning or not, const or not).
template <class Bf16View>
std::vector<float> widened(const Bf16View& x) {
  View1<float> f("widened", x.size());
  to_f32(Unmanaged1<const bf16>(x.data(), x.size()), f);
  const auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), f);
  return std::vector<float>(h.data(), h.data() + h.extent(0));
}

// Columns [c0, c0 + cols) of a host copy of a row-major [rows, width] matrix, row-major.
inline std::vector<float> column_block(const std::vector<float>& all, std::size_t width, std::size_t c0, std::size_t cols) {
  std::vector<float> out;
  for (std::size_t r = 0; r < all.size() / width; ++r) {
    out.insert(out.end(), all.begin() + static_cast<std::ptrdiff_t>(r * width + c0),
               all.begin() + static_cast<std::ptrdiff_t>(r * width + c0 + cols));
  }
  return out;
}

// [a | b | c] row by row: three row-major matrices of the same rows side by side in one.
inline std::vector<float> side_by_side(const std::vector<float>& a, std::size_t ac, const std::vector<float>& b,
                                       std::size_t bc, const std::vector<float>& c, std::size_t cc) {
  std::vector<float> out;
  for (std::size_t r = 0; r < a.size() / ac; ++r) {
    out.insert(out.end(), a.begin() + static_cast<std::ptrdiff_t>(r * ac), a.begin() + static_cast<std::ptrdiff_t>((r + 1) * ac));
    out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(r * bc), b.begin() + static_cast<std::ptrdiff_t>((r + 1) * bc));
    out.insert(out.end(), c.begin() + static_cast<std::ptrdiff_t>(r * cc), c.begin() + static_cast<std::ptrdiff_t>((r + 1) * cc));
  }
  return out;
}

// Restores the default tile size however a test ends.
struct ScopedGemmTile {
  std::int64_t saved = gemm_bf16_tile_elements();
  explicit ScopedGemmTile(std::int64_t n) { gemm_set_bf16_tile_elements(n); }
  ~ScopedGemmTile() { gemm_set_bf16_tile_elements(saved); }
};

}  // namespace testing_util
}  // namespace shardft
