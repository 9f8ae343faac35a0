#pragma once
// RMSNorm over the last dimension.
//   x [N,d], w [d]:  rstd[n] = 1 / sqrt(mean_j x[n,j]^2 + eps),   y[n,j] = w[j] * x[n,j] * rstd[n]
// Backward, with g[n,j] = dy[n,j] * w[j]:
//   dx[n,j] += rstd[n] * g[n,j] - rstd[n]^3 * x[n,j] * (1/d) * sum_k g[n,k] * x[n,k]
//   dw[j]   += sum_n dy[n,j] * x[n,j] * rstd[n]
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

void rmsnorm_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, float eps, Unmanaged2<float> y,
                     Unmanaged1<float> rstd);
// The same y written in bf16 (a bf16 GEMM's input): each element the fp32 y rounded once.
void rmsnorm_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, float eps, Unmanaged2<bf16> y,
                     Unmanaged1<float> rstd);

// Adds into dx (the residual stream's gradient arrives there first) and into dw; an empty dw (a frozen
// norm weight) is not computed. A non-empty dx_rounded receives the updated dx rounded to bf16 (what the
// next backward GEMMs of a bf16 step read) in the same pass.
void rmsnorm_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded = {});
// The same with x in bf16 (a bf16 step's kept residual stream): what its fp32 widening gives.
void rmsnorm_backward(Unmanaged2<const bf16> x, Unmanaged1<const float> w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded = {});

}  // namespace shardft
