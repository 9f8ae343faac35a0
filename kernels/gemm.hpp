#pragma once
// The one matrix-multiply interface every matmul in shardft goes through.
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C[M,N]      (row-major, fp32 accumulate)
// op(X) is X or X^T. A linear layer y = x W^T with W [out,in] is gemm(N, T, 1, x, W, 0, y).
// CPU build: OpenBLAS sgemm. The cuBLAS path is selected by the memory space (GPU build).
#include "kernels/types.hpp"

namespace shardft {

enum class Op { N, T };

void gemm(Op op_a, Op op_b, float alpha, Unmanaged2<const float> a, Unmanaged2<const float> b, float beta,
          Unmanaged2<float> c);

// The same product on raw host pointers with leading dimensions (row-major: ld = the row stride of the
// full array), for sub-matrices of larger arrays without a copy: one head's columns [rows, hd] of
// q [N, H*hd] start at q + row*H*hd + h*hd with ld H*hd. op(A) is [m,k], op(B) [k,n], C [m,n].
// Host memory only (BLAS sgemm); no shape checks beyond what BLAS does. Used by the tiled attention.
void gemm_ld(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
             float beta, float* c, int ldc);

// BLAS threads per process; shardft runs one rank per core, so 1 unless told otherwise.
void gemm_set_num_threads(int n);

// A linear layer over a flat weight buffer [out*in]: y[N,out] = x[N,in] W^T (+ beta * y).
void linear_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<float> y, float beta = 0.f);
// dx[N,in] (+)= dy[N,out] W ; dW[out,in] += dy^T x.
void linear_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<const float> dy,
                     Unmanaged2<float> dx, float dx_beta, Unmanaged1<float> dw);

}  // namespace shardft
