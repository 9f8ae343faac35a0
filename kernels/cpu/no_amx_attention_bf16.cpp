// kernels/amx_attention_bf16.hpp where the build has no AMX kernels (a CUDA build, or a compiler without
// AMX intrinsics): attention_fits is false, so the bf16 attention keeps its tiled kernels.
#include <stdexcept>

#include "kernels/amx_attention_bf16.hpp"

namespace shardft::amx {

bool attention_fits(int) { return false; }
void attention_forward(const AttentionGroup&, std::uint16_t*, std::int64_t, float*, std::int64_t) {
  throw std::logic_error("amx::attention_forward: this build has no AMX kernels");
}
void attention_backward(const AttentionGroup&, const std::uint16_t*, std::int64_t, const float*, const float*,
                        std::int64_t, std::uint16_t*, std::int64_t, std::uint16_t*, std::int64_t, std::uint16_t*,
                        std::int64_t) {
  throw std::logic_error("amx::attention_backward: this build has no AMX kernels");
}

}  // namespace shardft::amx
