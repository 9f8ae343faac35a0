#include "kernels/gemm.hpp"

#include <cblas.h>

#include <stdexcept>
#include <string>

extern "C" void openblas_set_num_threads(int num_threads);

namespace shardft {

namespace {
std::string shape(std::size_t r, std::size_t c) { return "[" + std::to_string(r) + "," + std::to_string(c) + "]"; }
}  // namespace

void gemm(Op op_a, Op op_b, float alpha, Unmanaged2<const float> a, Unmanaged2<const float> b, float beta,
          Unmanaged2<float> c) {
  static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible,
                "the BLAS GEMM needs host-accessible views; the GPU build uses the cuBLAS path");
  const std::size_t m = op_a == Op::N ? a.extent(0) : a.extent(1);
  const std::size_t k = op_a == Op::N ? a.extent(1) : a.extent(0);
  const std::size_t kb = op_b == Op::N ? b.extent(0) : b.extent(1);
  const std::size_t n = op_b == Op::N ? b.extent(1) : b.extent(0);
  if (k != kb || c.extent(0) != m || c.extent(1) != n) {
    throw std::invalid_argument("gemm: shapes do not match: op(A) " + shape(m, k) + ", op(B) " + shape(kb, n) +
                                ", C " + shape(c.extent(0), c.extent(1)));
  }
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, op_a == Op::N ? CblasNoTrans : CblasTrans, op_b == Op::N ? CblasNoTrans : CblasTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a.data(),
              static_cast<int>(a.extent(1)), b.data(), static_cast<int>(b.extent(1)), beta, c.data(),
              static_cast<int>(c.extent(1)));
}

void gemm_ld(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
             float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, op_a == Op::N ? CblasNoTrans : CblasTrans, op_b == Op::N ? CblasNoTrans : CblasTrans, m,
              n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_set_num_threads(int n) { openblas_set_num_threads(n); }

void linear_forward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<float> y, float beta) {
  const std::size_t out = y.extent(1), in = x.extent(1);
  if (w.extent(0) != out * in) throw std::invalid_argument("linear_forward: weight size does not match [out,in]");
  gemm(Op::N, Op::T, 1.f, x, Unmanaged2<const float>(w.data(), out, in), beta, y);
}

void linear_backward(Unmanaged2<const float> x, Unmanaged1<const float> w, Unmanaged2<const float> dy,
                     Unmanaged2<float> dx, float dx_beta, Unmanaged1<float> dw) {
  const std::size_t out = dy.extent(1), in = x.extent(1);
  if (w.extent(0) != out * in || dw.extent(0) != out * in) {
    throw std::invalid_argument("linear_backward: weight or gradient size does not match [out,in]");
  }
  gemm(Op::N, Op::N, 1.f, dy, Unmanaged2<const float>(w.data(), out, in), dx_beta, dx);
  gemm(Op::T, Op::N, 1.f, dy, x, 1.f, Unmanaged2<float>(dw.data(), out, in));
}

}  // namespace shardft
