#include <cmath>

#include "kernels/math.hpp"
#include "model/decoder.hpp"

namespace shardft {

namespace {
// Element e of parameter p gets the same value however the buffer is split across ranks.
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t z) { return kmath::splitmix64(z); }
KOKKOS_INLINE_FUNCTION double unit_open(std::uint64_t bits) {  // in (0, 1)
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
}  // namespace

void init_param_range(const ParamLayout& layout, const ModelConfig& cfg, std::uint64_t seed, int param,
                      std::int64_t begin, Unmanaged1<float> dst) {
  const ParamSpec& spec = layout.params()[param];
  if (spec.is_norm() || spec.is_bias()) {  // norm weights 1, biases 0 (as HF initialises them)
    Kokkos::deep_copy(dst, spec.is_norm() ? 1.f : 0.f);
    return;
  }
  if (spec.kind == ParamKind::lora_b) {  // PEFT: B = 0, so training starts from the base model
    Kokkos::deep_copy(dst, 0.f);
    return;
  }
  const std::uint64_t key = mix64(seed ^ mix64(0x5eed0000ull + static_cast<std::uint64_t>(param)));
  if (spec.kind == ParamKind::lora_a) {
    // PEFT: nn.init.kaiming_uniform_(A, a=sqrt(5)), i.e. uniform(-1/sqrt(in), 1/sqrt(in)) for A [r, in].
    const double bound = 1.0 / std::sqrt(static_cast<double>(spec.shape[1]));
    Kokkos::parallel_for(
        "init_lora_a", Range(0, dst.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) {
          const double u = unit_open(mix64(key + static_cast<std::uint64_t>(begin + i)));
          dst(i) = static_cast<float>(bound * (2.0 * u - 1.0));
        });
    return;
  }
  const double stddev = cfg.initializer_range;
  Kokkos::parallel_for(
      "init_normal", Range(0, dst.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) {
        // Box-Muller from two independent uniforms of this element's counter.
        const std::uint64_t c = key + 2ull * static_cast<std::uint64_t>(begin + i);
        const double u1 = unit_open(mix64(c)), u2 = unit_open(mix64(c + 1));
        const double z = kmath::sqrt(-2.0 * kmath::log(u1)) * kmath::cos(6.283185307179586 * u2);
        dst(i) = static_cast<float>(stddev * z);
      });
}

void init_params(const ParamLayout& layout, const ModelConfig& cfg, std::uint64_t seed, View1<float> flat) {
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const int pi = static_cast<int>(p);
    init_param_range(layout, cfg, seed, pi, 0,
                     Unmanaged1<float>(flat.data() + layout.offset(pi), layout.params()[p].numel()));
  }
}

}  // namespace shardft
