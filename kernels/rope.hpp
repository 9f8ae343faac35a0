#pragma once
// Rotary position embedding, HF Llama "rotate half" convention, in place.
//   x [N, heads*hd], pos [N]; for each head and i < hd/2, with a = pos * theta^(-2i/hd):
//     x'[i]      = x[i] cos a - x[i+hd/2] sin a
//     x'[i+hd/2] = x[i+hd/2] cos a + x[i] sin a
// The backward is the inverse rotation (angle -a) applied to the gradient.
#include "kernels/types.hpp"

namespace shardft {

void rope_forward(Unmanaged2<float> x, Unmanaged1<const std::int32_t> pos, int head_dim, double theta);
void rope_backward(Unmanaged2<float> dx, Unmanaged1<const std::int32_t> pos, int head_dim, double theta);

}  // namespace shardft
