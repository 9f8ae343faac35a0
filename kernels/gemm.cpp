#include "kernels/gemm.hpp"

#include <cblas.h>

#include <stdexcept>
#include <string>

// The GPU build's dispatch: views the GPU can read go to cuBLAS (kernels/cuda/cublas_gemm). It needs
// both the CUDA toolkit (SHARDFT_HAVE_CUDA: the cuBLAS module is compiled) and a CUDA-enabled Kokkos
// (KOKKOS_ENABLE_CUDA: views can live in CudaSpace). With a Serial Kokkos, as in the CPU build, every
// view is a host view and BLAS does the work even when cuBLAS is linked.
#if defined(SHARDFT_HAVE_CUDA) && defined(KOKKOS_ENABLE_CUDA)
#define SHARDFT_GEMM_CUBLAS 1
#include <mutex>

#include "kernels/cuda/cublas_gemm.hpp"
#endif

extern "C" void openblas_set_num_threads(int num_threads);

namespace shardft {

namespace {

// Views the GPU can read (CudaSpace, CudaUVMSpace) go to cuBLAS; host views to BLAS.
#if defined(SHARDFT_GEMM_CUBLAS)
constexpr bool kGemmOnCublas = Kokkos::SpaceAccessibility<Kokkos::CudaSpace, MemSpace>::accessible;
#else
constexpr bool kGemmOnCublas = false;
#endif
static_assert(kGemmOnCublas || Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible,
              "gemm: views must be host-accessible (BLAS) or, in a CUDA build, device-accessible (cuBLAS)");

std::string shape(std::size_t r, std::size_t c) { return "[" + std::to_string(r) + "," + std::to_string(c) + "]"; }
}  // namespace

void gemm(Op op_a, Op op_b, float alpha, Unmanaged2<const float> a, Unmanaged2<const float> b, float beta,
          Unmanaged2<float> c) {
  const std::size_t m = op_a == Op::N ? a.extent(0) : a.extent(1);
  const std::size_t k = op_a == Op::N ? a.extent(1) : a.extent(0);
  const std::size_t kb = op_b == Op::N ? b.extent(0) : b.extent(1);
  const std::size_t n = op_b == Op::N ? b.extent(1) : b.extent(0);
  if (k != kb || c.extent(0) != m || c.extent(1) != n) {
    throw std::invalid_argument("gemm: shapes do not match: op(A) " + shape(m, k) + ", op(B) " + shape(kb, n) +
                                ", C " + shape(c.extent(0), c.extent(1)));
  }
  if (m == 0 || n == 0) return;
#if defined(SHARDFT_GEMM_CUBLAS)
  if constexpr (kGemmOnCublas) {
    // cuBLAS runs on the stream of Kokkos' default CUDA instance, so GEMMs and Kokkos kernels stay in
    // issue order without a fence.
    static std::once_flag bound;
    std::call_once(bound, [] { cuda::set_compute_stream(Kokkos::Cuda().cuda_stream()); });
    cuda::sgemm(op_a == Op::T, op_b == Op::T, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
                a.data(), static_cast<int>(a.extent(1)), b.data(), static_cast<int>(b.extent(1)), beta, c.data(),
                static_cast<int>(c.extent(1)));
    return;
  }
#endif
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
