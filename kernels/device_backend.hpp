#pragma once
// What the kernels' front ends (compute_device, memory_capacity, gemm, the kernel timer) need of the
// device their Kokkos computes on, asked without `#if`. CMake compiles one implementation:
// kernels/cuda/kokkos_device_backend.cpp where Kokkos runs on CUDA (cuBLAS and CUDA events on Kokkos'
// stream), kernels/host/device_backend.cpp elsewhere. On the host there is no device: the queries say
// so, and the device calls, which the front ends make only where kComputeOnDevice, throw.
#include <cstddef>
#include <cstdint>
#include <string>

namespace shardft::device_backend {

// The GPU the compute space runs on; present false where it is the host, or no GPU is visible.
struct ComputeGpu {
  bool present = false;
  std::string name;
  int compute_capability = 0;  // major * 10 + minor
};
ComputeGpu compute_gpu();

// Free and total bytes of the compute device's memory; false on the host.
bool device_memory(double& free_bytes, double& total_bytes);

// The FLOP/s of a square GEMM on the device (bf16 inputs or fp32); 0 on the host.
double measure_gemm_flops(bool bf16);

// Products on the device's GEMM library, on the compute queue, in the row-major terms of
// kernels/gemm.hpp; bf16 operands as their bits.
void sgemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);
void gemm_bf16_f32(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                   int lda, const std::uint16_t* b, int ldb, float beta, float* c, int ldc);
void gemm_bf16_bf16(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                    int lda, const std::uint16_t* b, int ldb, float beta, std::uint16_t* c, int ldc);
std::string gemm_library();  // "cuBLAS (device views)"; "" on the host

// Marks on the compute queue, for timing kernels without a fence (kernels/kernel_timer.cpp): elapsed
// milliseconds between two marks once both are reached; false / 0 on the host.
bool has_queue_marks();
std::size_t record_queue_mark();
double queue_marks_elapsed_ms(std::size_t a, std::size_t b);
void clear_queue_marks();

}  // namespace shardft::device_backend
