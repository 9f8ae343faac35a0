#pragma once
// cuBLAS GEMM on device pointers (GPU builds: compiled when the CUDA toolkit is found).
//
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C[M,N]        row-major, fp32 accumulate
//
// op(X) is X or X^T. Row-major, as every shardft tensor: A is [M,K] (op N, lda >= K) or [K,M]
// (op T, lda >= M); B is [K,N] (op N, ldb >= N) or [N,K] (op T, ldb >= K); C is [M,N], ldc >= N.
// A linear layer y[N,out] = x[N,in] W^T with W [out,in] is gemm(false, true, ...).
//
// cuBLAS is column-major. A row-major matrix X [r,c] with row stride ld is, read column-major, X^T
// [c,r] with the same ld. So the row-major product C = op(A) op(B) is computed as the column-major
// product C^T = op(B)^T op(A)^T: the operands swap places (B first), M and N swap, and each keeps
// its own transpose flag (llm.c does the same). No data is moved.
//
// Two element types:
//  - fp32 in, fp32 out: cublasGemmEx with CUBLAS_COMPUTE_32F (plain fp32 FMA, no TF32 rounding, so
//    it agrees with the host sgemm to rounding order; TF32 is never enabled on this handle).
//  - bf16 in, fp32 or bf16 out: cublasGemmEx with CUDA_R_16BF inputs, CUDA_R_32F or CUDA_R_16BF output, CUBLAS_COMPUTE_32F
//    (tensor cores on sm_80+, products of bf16 are exact in fp32, accumulation in fp32). The
//    inputs are bf16 buffers the caller already holds (shardft::bf16 or __nv_bfloat16: the same 16
//    bits, the top half of an fp32): this module is compiled by the host compiler, without nvcc, so
//    it has no conversion kernel of its own.
//
// cuBLASLt is not used: for plain GEMMs (no fused bias/activation epilogue) cublasGemmEx already
// dispatches to the cuBLASLt kernels and heuristics inside libcublas, and gets the same workspace
// through cublasSetWorkspace (set below). Calling cuBLASLt directly would pay off only with fused
// epilogues, which shardft's kernels do not have; it would also need libcublasLt on the link line.
//
// One cuBLAS handle per process, created on first use, bound to the compute stream (the stream
// every kernel and GEMM of this rank runs on; the CUDA legacy default stream unless set). Every
// call is asynchronous on that stream. Errors throw std::runtime_error naming the cuBLAS status.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardft::cuda {

// Throws std::runtime_error("cuBLAS <what>: CUBLAS_STATUS_... (<description>)") unless success.
void check_cublas(cublasStatus_t status, const char* what);
// Throws std::runtime_error("CUDA <what>: <error string>") unless cudaSuccess.
void check_cuda(cudaError_t status, const char* what);

// Number of CUDA devices this process sees: 0 when there is no GPU or no driver (never throws).
int device_count();
// The current device's name as cudaGetDeviceProperties reports it ("NVIDIA H100 80GB HBM3"); "" when
// there is no device.
std::string device_name();
// The current device's compute capability as major * 10 + minor (90 for an H100); 0 when there is no device.
int compute_capability();
// The current device's free and total memory (cudaMemGetInfo); zeros when there is no device.
struct DeviceMemory {
  std::size_t free_bytes = 0, total_bytes = 0;
};
DeviceMemory device_memory();

// The stream GEMMs run on. Setting it rebinds the handle (if created); cudaStream_t{} is the legacy
// default stream. The GPU build of the model sets it to its Kokkos execution space's stream.
void set_compute_stream(cudaStream_t stream);
cudaStream_t compute_stream();
// The process's cuBLAS handle, created on first use (needs a device) and bound to compute_stream().
cublasHandle_t cublas_handle();
// GEMMs issued from now on are sized for this many SMs (cublasSetSmCountTarget), leaving the rest to
// work on another stream; 0: every SM of the device (the default). Kept for a handle made later.
void set_gemm_sm_target(int sms);
// The current device's number of SMs; 0 when there is no device.
int sm_count();

// fp32: C = alpha op(A) op(B) + beta C on device pointers (row-major, leading dimensions as above).
void sgemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc);

// bf16 inputs (raw bf16 bits on the device), fp32 accumulate, fp32 output C.
void gemm_bf16_f32(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                   int lda, const std::uint16_t* b, int ldb, float beta, float* c, int ldc);

// bf16 inputs, fp32 accumulate, bf16 output C: the accumulator (alpha op(A) op(B) + beta C, C read as
// bf16) rounded to nearest even, as rounding an fp32 C would.
void gemm_bf16_bf16(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                    int lda, const std::uint16_t* b, int ldb, float beta, std::uint16_t* c, int ldc);

// FLOP/s this device reaches on a square n x n x n GEMM (bf16 inputs or fp32), timed with CUDA events
// on the compute stream after a warm-up: the attainable peak when the device is not in a known table.
double measure_gemm_flops(bool bf16, int n = 4096);

}  // namespace shardft::cuda
