#pragma once
// Rotary position embedding, HF Llama "rotate half" convention, in place.
//   x [N, heads*hd], pos [N]; for each head and i < hd/2, with a = pos * theta^(-2i/hd):
//     x'[i]      = x[i] cos a - x[i+hd/2] sin a
//     x'[i+hd/2] = x[i+hd/2] cos a + x[i] sin a
// The backward is the inverse rotation (angle -a) applied to the gradient.
#include <vector>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

void rope_forward(Unmanaged2<float> x, Unmanaged1<const std::int32_t> pos, int head_dim, double theta);
void rope_backward(Unmanaged2<float> dx, Unmanaged1<const std::int32_t> pos, int head_dim, double theta);

}  // namespace shardft

namespace shardft {

// Plain RoPE's frequencies theta^(-2i/hd), i < hd/2, in double, computed as rope_forward computes them.
std::vector<double> plain_rope_inv_freq(int head_dim, double theta);

// The fused path: cos / sin of every angle a(p, i) = p * inv_freq[i] for p < positions, i < hd/2, times
// attention_scaling, computed once per model in double and rounded to float, instead of an exp, cos and
// sin per token, pair and call. inv_freq is any RoPE variant's (linear, NTK, YaRN, Llama 3 ...: the caller
// computes it); attention_scaling is YaRN's factor on cos and sin, 1.0 for the others. With plain RoPE's
// frequencies and 1.0 the table holds exactly what rope_forward computes.
struct RopeTable {
  View2<float> cos, sin;    // [positions, hd/2]
  View1<double> inv_freq;   // [hd/2]: the angles of positions beyond the table
  double attention_scaling = 1.0;
  int head_dim = 0;
};
RopeTable make_rope_table(std::int64_t positions, const std::vector<double>& inv_freq, double attention_scaling);
RopeTable make_rope_table(std::int64_t positions, int head_dim, double theta);  // plain RoPE

// q [N, Hq*hd] and k [N, Hk*hd] rotated in place in one pass over the tokens, by +a (forward) or by -a
// (inverse: the backward of the forward rotation, applied to dq and dk), and scaled by the table's
// attention_scaling either way (the backward of a scaled rotation is the scaled inverse rotation).
// Positions beyond the table fall back to computing their angle from inv_freq.
void rope_rotate_qk(Unmanaged2<float> q, Unmanaged2<float> k, Unmanaged1<const std::int32_t> pos,
                    const RopeTable& table, bool inverse);
// The same rotation of bf16 q and k (a bf16 step's): each pair rotated in fp32 and rounded once, the values
// the fp32 form gives on the same (bf16) inputs, rounded. q and k may be column blocks of a wider array
// (the [q | k | v] output of one projection GEMM); each row must be contiguous.
void rope_rotate_qk(Strided2<bf16> q, Strided2<bf16> k, Unmanaged1<const std::int32_t> pos,
                    const RopeTable& table, bool inverse);
// The form a GPU runs where every row of q, k and the table allows 16-byte packs (head_dim a multiple of
// 16): a thread per eight pairs of a head of a token. Callable on any backend, so that CPU tests hold it
// to the host's loops bit for bit; std::invalid_argument where the packs do not fit.
void rope_rotate_qk_packed(Strided2<bf16> q, Strided2<bf16> k, Unmanaged1<const std::int32_t> pos,
                           const RopeTable& table, bool inverse);

}  // namespace shardft
