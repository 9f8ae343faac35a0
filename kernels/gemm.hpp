#pragma once
// The one matrix-multiply interface every matmul in shardft goes through.
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C[M,N]      (row-major, fp32 accumulate)
// op(X) is X or X^T. A linear layer y = x W^T with W [out,in] is gemm(N, T, 1, x, W, 0, y).
// CPU build: OpenBLAS sgemm (bf16 x bf16 on AMX tiles where the CPU has them). The cuBLAS path is selected by the memory space (GPU build).
#include <cstdint>
#include <string>

#include "kernels/bf16.hpp"
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

// A GEMM operand as it is stored: fp32, or bf16 (bf16 compute: half the bytes). Row-major: a whole
// matrix, or a block of its columns (columns(): a LoRA term's share of a stacked layer's output gradient,
// read in place with the matrix's row stride, where a copy would move the block through memory first).
struct GemmOperand {
  GemmOperand(Unmanaged2<const float> v) : f32(v) {}                  // NOLINT: implicit, like the view
  GemmOperand(Unmanaged2<const bf16> v) : b16(v), is_bf16(true) {}  // NOLINT
  // Columns [col0, col0 + cols) of `whole` (itself a whole matrix); throws std::invalid_argument where
  // they leave it.
  static GemmOperand columns(const GemmOperand& whole, std::int64_t col0, std::int64_t cols);

  std::size_t extent(int i) const {
    if (i == 1 && cols_ >= 0) return static_cast<std::size_t>(cols_);
    return is_bf16 ? b16.extent(i) : f32.extent(i);
  }
  // The row stride in elements (the stored matrix's width) and the operand's first element.
  std::int64_t ld() const { return static_cast<std::int64_t>(is_bf16 ? b16.extent(1) : f32.extent(1)); }
  const float* f32_data() const { return f32.data() + col0_; }
  const bf16* b16_data() const { return b16.data() + col0_; }
  bool whole() const { return cols_ < 0; }

  // The stored matrix: all of it, also for a column block (read a block through extent, ld and *_data).
  Unmanaged2<const float> f32;
  Unmanaged2<const bf16> b16;
  bool is_bf16 = false;

 private:
  std::int64_t col0_ = 0, cols_ = -1;  // cols_ -1: the whole matrix
};

// The same product with operands of either storage; C is fp32 and every product accumulates in fp32.
// Both fp32: gemm() above. Both bf16 on the GPU: cuBLAS's bf16 GEMM (cuda::gemm_bf16_f32); on a CPU with
// AMX, its bf16 tiles (kernels/amx_gemm_bf16.hpp). Otherwise (other CPUs, and mixed operands) each bf16
// operand is widened to fp32 a tile at a time (whole
// rows of op(A), whole columns of op(B), at most gemm_bf16_tile_elements() each) into scratch, and each
// tile of C is one sgemm over all of K. Widening is exact, so the products are those of the bf16 values.
void gemm_mixed(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                Unmanaged2<float> c);
// C a block of a wider matrix's columns (kernels/types.hpp columns_of), written in place: a LoRA term's
// share of a stacked layer's output. Its rows must be contiguous (stride_1 1).
void gemm_mixed_to_columns(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b, float beta,
                           Strided2<float> c);
// The same product written in bf16: each element alpha times the fp32 accumulator, plus beta times C's
// value where beta is not 0 (C read; a residual branch added into a bf16 stream), in fp32, rounded once to
// nearest even, as rounding an fp32 C would. Both bf16 on the GPU: cuBLAS's bf16 output
// (cuda::gemm_bf16_bf16); on AMX, each 32 x 32 block rounded from its tiles; otherwise the fp32 product in
// scratch, then rounded.
void gemm_mixed_bf16_out(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b,
                         Unmanaged2<bf16> c, float beta = 0.f);
void gemm_mixed_bf16_out_to_columns(Op op_a, Op op_b, float alpha, const GemmOperand& a, const GemmOperand& b,
                                    Strided2<bf16> c, float beta = 0.f);  // C a column block, as above
// The widening scratch: elements per operand tile (default 1M, 4 MB of fp32; at least one row or column
// of K is always taken). Held from the first mixed GEMM until Kokkos::finalize.
void gemm_set_bf16_tile_elements(std::int64_t n);
std::int64_t gemm_bf16_tile_elements();
// Whether a bf16 x bf16 product widens its operands (a CPU without AMX) instead of reading bf16 (cuBLAS,
// AMX tiles, whose packed copies of the operands are host memory outside the Kokkos spaces).
bool gemm_widens_bf16();

// BLAS threads per process; shardft runs one rank per core, so 1 unless told otherwise.
void gemm_set_num_threads(int n);
// Which library runs the GEMMs in this build: "cuBLAS (device views)" or "BLAS (OpenBLAS)"; with_idle
// adds that cuBLAS is linked but idle where the toolkit was found but Kokkos has no CUDA backend.
std::string gemm_backend_description(bool with_idle);

// A linear layer over a flat weight buffer [out*in]: y[N,out] = x[N,in] W^T (+ beta * y).
void linear_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<float> y, float beta = 0.f);
// dx[N,in] (+)= dy[N,out] W ; dW[out,in] += dy^T x.
void linear_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<const float> dy,
                     Unmanaged2<float> dx, float dx_beta, Unmanaged1<float> dw);

}  // namespace shardft
