// The fused attention's dispatch (kernels/attention_fused.hpp). No build has the fused kernels yet: every
// entry point but the queries throws, and the model runs the log-sum-exp kernels.
#include "kernels/attention_fused.hpp"

#include <stdexcept>

namespace shardft {


namespace {
[[noreturn]] void not_built() {
  throw std::logic_error("fused attention: " + fused_attention_backend() +
                         "; the model must use the log-sum-exp kernels (kernels/attention_lse.hpp)");
}
}  // namespace

bool fused_attention_built() { return false; }

std::string fused_attention_backend() { return "not built"; }

std::int64_t fused_attention_stats_size(const AttentionShape&, const AttentionSegments&) { not_built(); }

void fused_attention_forward(const AttentionShape&, const AttentionSegments&, Unmanaged2<const bf16>,
                             Unmanaged2<const bf16>, Unmanaged2<const bf16>, Unmanaged2<bf16>, Unmanaged1<float>) {
  not_built();
}

void fused_attention_backward(const AttentionShape&, const AttentionSegments&, Unmanaged2<const bf16>,
                              Unmanaged2<const bf16>, Unmanaged2<const bf16>, Unmanaged2<const bf16>,
                              Unmanaged2<const bf16>, Unmanaged1<const float>, Unmanaged2<bf16>, Unmanaged2<bf16>,
                              Unmanaged2<bf16>) {
  not_built();
}

}  // namespace shardft
