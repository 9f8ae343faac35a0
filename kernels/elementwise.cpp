#include "kernels/elementwise.hpp"
#include "kernels/math.hpp"

#include "kernels/bf16.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/kernel_scratch.hpp"

namespace shardft {

void add_inplace(Unmanaged1<float> y, Unmanaged1<const float> x) {
  Kokkos::parallel_for("add_inplace", Range(0, y.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { y(i) += x(i); });
}

void scale_inplace(Unmanaged1<float> x, float c) {
  Kokkos::parallel_for("scale_inplace", Range(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { x(i) *= c; });
}

// Blocks of kBlock elements, each summed in kLanes independent double accumulators: one running
// double sum is a chain of dependent adds (latency-bound, about 1.4 GB/s); independent lanes vectorise
// and run at memory speed. Still double precision throughout, only the order of the additions changes.
void sum_squares(Unmanaged1<const float> x, Unmanaged1<double> out) {
  constexpr std::int64_t kBlock = 4096;
  constexpr int kLanes = 32;
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const float* data = x.data();
  Kokkos::parallel_reduce(
      "sum_squares", Range(0, blocks),
      KOKKOS_LAMBDA(const std::int64_t b, double& acc) {
        const float* p = data + b * kBlock;
        const std::int64_t len = n - b * kBlock < kBlock ? n - b * kBlock : kBlock;
        double lane[kLanes] = {};
        std::int64_t i = 0;
        for (; i + kLanes <= len; i += kLanes) {
          for (int l = 0; l < kLanes; ++l) lane[l] += static_cast<double>(p[i + l]) * p[i + l];
        }
        double sum = 0.0;
        for (int l = 0; l < kLanes; ++l) sum += lane[l];
        for (; i < len; ++i) sum += static_cast<double>(p[i]) * p[i];
        acc += sum;
      },
      Kokkos::View<double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(out.data()));
}

double sum_squares(Unmanaged1<const float> x) {
  const auto out = kernel_scratch<double>("sum_squares_host", 1);
  sum_squares(x, out);
  return read_scalar(out, "sum_squares");
}

// The factor once, on the device, then one multiply per element (by 1 when not clipping: exact).
void clip_to_norm(Unmanaged1<float> g, Unmanaged1<const double> norm_sq, double max_norm) {
  if (!(max_norm > 0)) return;
  const auto factor = kernel_scratch<float>("clip_factor", 1);
  clip_factor(norm_sq, max_norm, factor);
  apply_clip_factor(g, factor);
}

void clip_factor(Unmanaged1<const double> norm_sq, double max_norm, Unmanaged1<float> factor) {
  Kokkos::parallel_for(
      "clip_factor", Range(0, 1), KOKKOS_LAMBDA(const std::int64_t) {
        const double norm = kmath::sqrt(norm_sq(0));
        factor(0) = max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / (norm + 1e-6)) : 1.f;
      });
}

void apply_clip_factor(Unmanaged1<float> g, Unmanaged1<const float> factor) {
  Kokkos::parallel_for(
      "clip_to_norm", Range(0, g.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { g(i) *= factor(0); });
}

void add_scalar(Unmanaged1<double> acc, Unmanaged1<const double> x) {
  Kokkos::parallel_for(
      "add_scalar", Range(0, 1), KOKKOS_LAMBDA(const std::int64_t) { acc(0) += x(0); });
}

double read_scalar(Unmanaged1<const double> x, const char* what) {
  double value = 0.0;
  Kokkos::deep_copy(Kokkos::View<double, HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(&value),
                    Kokkos::View<const double, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(x.data()));
  count_device_copy(what, sizeof(double));
  count_host_sync(what);
  return value;
}

void round_to_bf16(Unmanaged1<const float> src, Unmanaged1<float> dst) {
  Kokkos::parallel_for(
      "round_to_bf16", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = round_to_bf16(src(i)); });
}

void to_bf16(Unmanaged1<const float> src, Unmanaged1<bf16> dst) {
  Kokkos::parallel_for(
      "to_bf16", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = bf16(src(i)); });
}

void round_and_copy_to_bf16(Unmanaged1<float> x, Unmanaged1<bf16> kept) {
  Kokkos::parallel_for(
      "round_and_copy_to_bf16", Range(0, x.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) {
        const bf16 b(x(i));
        kept(i) = b;
        x(i) = static_cast<float>(b);
      });
}

void to_f32(Unmanaged1<const bf16> src, Unmanaged1<float> dst) {
  Kokkos::parallel_for(
      "to_f32", Range(0, src.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) { dst(i) = static_cast<float>(src(i)); });
}

bool all_finite(Unmanaged1<const float> x) {
  std::int64_t bad = 0;
  Kokkos::parallel_reduce(
      "all_finite", Range(0, x.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i, std::int64_t& acc) { acc += kmath::isfinite(x(i)) ? 0 : 1; }, bad);
  count_host_sync("all_finite");
  return bad == 0;
}

}  // namespace shardft
