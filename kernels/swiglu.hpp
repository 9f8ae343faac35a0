#pragma once
// SwiGLU gate: s = silu(g) * u, elementwise on [N, I]; silu(x) = x * sigmoid(x).
// Backward: du = ds * silu(g);  dg = ds * u * sigmoid(g) * (1 + g * (1 - sigmoid(g))).
#include "kernels/types.hpp"

namespace shardft {

void swiglu_forward(Unmanaged2<const float> g, Unmanaged2<const float> u, Unmanaged2<float> s);
// Writes (overwrites) dg and du.
void swiglu_backward(Unmanaged2<const float> g, Unmanaged2<const float> u, Unmanaged2<const float> ds,
                     Unmanaged2<float> dg, Unmanaged2<float> du);

}  // namespace shardft

namespace shardft {

// The fused MLP layout: the gate and up projections come out of ONE GEMM as gu [N, 2I] = h [gate; up]^T,
// g = gu[:, :I], u = gu[:, I:]. Forward writes s [N, I]; backward overwrites gu with [dg | du] in place,
// so the MLP's backward needs no [N, I] buffers beyond gu, s and ds.
void swiglu_forward_packed(Unmanaged2<const float> gu, Unmanaged2<float> s);
void swiglu_backward_packed_inplace(Unmanaged2<float> gu, Unmanaged2<const float> ds);

}  // namespace shardft
