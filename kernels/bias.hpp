#pragma once
// Bias of a linear layer (y = x W^T + b), kept apart from the GEMM so that the GEMM stays one call
// into BLAS / cuBLAS.
//   forward:  y [N,out], b [out]:   y[n,j] += b[j]
//   backward: dy [N,out]:           db[j]  += sum_n dy[n,j]
// (the bias does not change dx: d y / d x is W alone)
#include "kernels/types.hpp"

namespace shardft {

void bias_forward(Unmanaged2<float> y, Unmanaged1<const float> b);

// Adds into db (gradients accumulate across micro-batches).
void bias_backward(Unmanaged2<const float> dy, Unmanaged1<float> db);

}  // namespace shardft
