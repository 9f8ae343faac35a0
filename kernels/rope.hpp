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

namespace shardft {

// The fused path: cos / sin of every angle a(p, i) = p * theta^(-2i/hd) for p < positions, i < hd/2,
// computed once per model (in double, rounded to float exactly as rope_forward rounds them) instead of
// an exp, cos and sin per token, pair and call.
struct RopeTable {
  View2<float> cos, sin;  // [positions, hd/2]
  int head_dim = 0;
  double theta = 0.0;
};
RopeTable make_rope_table(std::int64_t positions, int head_dim, double theta);

// q [N, Hq*hd] and k [N, Hk*hd] rotated in place in one pass over the tokens, by +a (forward) or by -a
// (inverse: the backward of the forward rotation, applied to dq and dk). Positions beyond the table
// fall back to computing their angle.
void rope_rotate_qk(Unmanaged2<float> q, Unmanaged2<float> k, Unmanaged1<const std::int32_t> pos,
                    const RopeTable& table, bool inverse);

}  // namespace shardft
