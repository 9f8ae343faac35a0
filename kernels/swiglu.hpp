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
