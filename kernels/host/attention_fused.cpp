// kernels/attention_fused.hpp where no fused attention is built (no cuDNN, or Kokkos not on CUDA):
// every entry point but the queries throws.
#include "kernels/attention_fused.hpp"

#include <stdexcept>
#include <string>

namespace shardft {

namespace {
[[noreturn]] void not_built() {
  throw std::logic_error("fused attention: " + fused_attention_backend() +
                         "; the model must use the log-sum-exp kernels (kernels/attention_lse.hpp)");
}
}  // namespace

bool fused_attention_built() { return false; }

bool fused_attention_compiled() { return false; }

std::string fused_attention_backend() { return "not built"; }

std::int64_t fused_attention_stats_size(const AttentionShape&, const AttentionSegments&) { not_built(); }

void fused_attention_prepare(const AttentionShape&, const AttentionSegments&, bool) { not_built(); }

void fused_attention_forward(const AttentionShape&, const AttentionSegments&, Strided2<const bf16>,
                             Strided2<const bf16>, Strided2<const bf16>, Unmanaged2<bf16>, Unmanaged1<float>) {
  not_built();
}

void fused_attention_backward(const AttentionShape&, const AttentionSegments&, Strided2<const bf16>,
                              Strided2<const bf16>, Strided2<const bf16>, Unmanaged2<const bf16>,
                              Unmanaged2<const bf16>, Unmanaged1<const float>, Strided2<bf16>, Strided2<bf16>,
                              Strided2<bf16>) {
  not_built();
}

}  // namespace shardft
