// kernels/avx512_attention_fp32.hpp where the build has no AVX-512 kernels (a CUDA build, or a compiler
// without AVX-512 intrinsics): attention_fits is false, so the fp32 attention keeps its tiled kernels.
#include <stdexcept>

#include "kernels/avx512_attention_fp32.hpp"

namespace shardft::avx512 {

bool attention_fits(int) { return false; }
void attention_forward(const AttentionGroup&, float*, std::int64_t, float*, std::int64_t) {
  throw std::logic_error("avx512::attention_forward: this build has no AVX-512 kernels");
}
void attention_backward(const AttentionGroup&, const float*, std::int64_t, const float*, const float*, std::int64_t,
                        float*, std::int64_t, float*, std::int64_t, float*, std::int64_t) {
  throw std::logic_error("avx512::attention_backward: this build has no AVX-512 kernels");
}

}  // namespace shardft::avx512
