// kernels/device_backend.hpp where Kokkos runs on CUDA: the GPU, cuBLAS on the stream of Kokkos' default
// CUDA instance (GEMMs and Kokkos kernels stay in issue order without a fence) and CUDA events recorded on
// it (kernels/cuda/stream_marks).
#include "kernels/device_backend.hpp"

#include <Kokkos_Core.hpp>

#include <mutex>

#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/cuda/stream_marks.hpp"

namespace shardft::device_backend {

namespace {
cudaStream_t compute_stream() { return Kokkos::Cuda().cuda_stream(); }

void bind_cublas_stream() {
  static std::once_flag bound;
  std::call_once(bound, [] { cuda::set_compute_stream(compute_stream()); });
}
}  // namespace

ComputeGpu compute_gpu() {
  ComputeGpu g;
  if (cuda::device_count() == 0) return g;
  g.present = true;
  g.name = cuda::device_name();
  g.compute_capability = cuda::compute_capability();
  return g;
}

bool device_memory(double& free_bytes, double& total_bytes) {
  const cuda::DeviceMemory m = cuda::device_memory();
  free_bytes = static_cast<double>(m.free_bytes);
  total_bytes = static_cast<double>(m.total_bytes);
  return true;
}

double measure_gemm_flops(bool bf16) { return cuda::measure_gemm_flops(bf16); }

void sgemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  bind_cublas_stream();
  cuda::sgemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16_f32(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                   int lda, const std::uint16_t* b, int ldb, float beta, float* c, int ldc) {
  bind_cublas_stream();
  cuda::gemm_bf16_f32(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_bf16_bf16(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                    int lda, const std::uint16_t* b, int ldb, float beta, std::uint16_t* c, int ldc) {
  bind_cublas_stream();
  cuda::gemm_bf16_bf16(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::string gemm_library() { return "cuBLAS (device views)"; }

bool has_queue_marks() { return true; }
std::size_t record_queue_mark() { return cuda::record_stream_mark(compute_stream()); }
double queue_marks_elapsed_ms(std::size_t a, std::size_t b) { return cuda::stream_marks_elapsed_ms(a, b); }
void clear_queue_marks() { cuda::clear_stream_marks(); }

}  // namespace shardft::device_backend
