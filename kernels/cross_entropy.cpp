#include "kernels/cross_entropy.hpp"

#include "kernels/math.hpp"

namespace shardft {

namespace {

KOKKOS_INLINE_FUNCTION float row_logsumexp(const float* z, int vocab) {
  float mx = z[0];
  for (int v = 1; v < vocab; ++v) mx = z[v] > mx ? z[v] : mx;
  float s = 0.f;
  for (int v = 0; v < vocab; ++v) s += kmath::exp(z[v] - mx);
  return mx + kmath::log(s);
}

std::int64_t count_targets(Unmanaged1<const std::int32_t> targets) {
  std::int64_t count = 0;
  Kokkos::parallel_reduce(
      "cross_entropy_count", Range(0, targets.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t n, std::int64_t& acc) { acc += targets(n) == kIgnoreIndex ? 0 : 1; }, count);
  return count;
}

}  // namespace

CrossEntropySums cross_entropy_forward(Unmanaged2<const float> logits, Unmanaged1<const std::int32_t> targets) {
  const int vocab = static_cast<int>(logits.extent(1));
  CrossEntropySums out;
  Kokkos::parallel_reduce(
      "cross_entropy_forward", Range(0, logits.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t n, double& acc) {
        const std::int32_t t = targets(n);
        if (t == kIgnoreIndex) return;
        const float* z = &logits(n, 0);
        acc += static_cast<double>(row_logsumexp(z, vocab) - z[t]);
      },
      out.loss_sum);
  out.count = count_targets(targets);
  return out;
}

CrossEntropySums cross_entropy_forward_backward(Unmanaged2<float> logits, Unmanaged1<const std::int32_t> targets,
                                                float grad_scale) {
  const int vocab = static_cast<int>(logits.extent(1));
  CrossEntropySums out;
  Kokkos::parallel_reduce(
      "cross_entropy_forward_backward", Range(0, logits.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t n, double& acc) {
        const std::int32_t t = targets(n);
        float* z = &logits(n, 0);
        if (t == kIgnoreIndex) {
          for (int v = 0; v < vocab; ++v) z[v] = 0.f;
          return;
        }
        const float lse = row_logsumexp(z, vocab);
        acc += static_cast<double>(lse - z[t]);
        for (int v = 0; v < vocab; ++v) z[v] = grad_scale * kmath::exp(z[v] - lse);
        z[t] -= grad_scale;
      },
      out.loss_sum);
  out.count = count_targets(targets);
  return out;
}

}  // namespace shardft
