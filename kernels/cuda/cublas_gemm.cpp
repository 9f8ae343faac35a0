#include "kernels/cuda/cublas_gemm.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <mutex>
#include <stdexcept>

namespace shardft::cuda {

namespace {

// cuBLAS recommends 32 MiB of workspace on Hopper and 4 MiB elsewhere; one buffer for every GEMM of
// the process (they are ordered on one stream).
constexpr std::size_t kWorkspaceBytes = 32u << 20;

struct HandleState {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;  // legacy default stream until set
  void* workspace = nullptr;
  int sm_target = 0;  // set_gemm_sm_target's: 0 is the whole device
};

// Never destroyed: a handle torn down by a static destructor after the CUDA runtime has unloaded
// crashes at exit, and the driver reclaims everything when the process ends.
HandleState& state() {
  static HandleState* s = new HandleState;
  return *s;
}

// cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace is set after it.
void bind(HandleState& s) {
  check_cublas(cublasSetStream(s.handle, s.stream), "cublasSetStream");
  check_cublas(cublasSetWorkspace(s.handle, s.workspace, kWorkspaceBytes), "cublasSetWorkspace");
}

void release(void* a, void* b, void* c, cudaEvent_t start, cudaEvent_t stop) {
  for (void* p : {a, b, c}) {
    if (p) cudaFree(p);
  }
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
}

cublasOperation_t op(bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; }

// C[M,N] row-major = C^T[N,M] column-major = op(B)^T op(A)^T: B goes first, M and N swap.
void gemm_ex(bool ta, bool tb, int m, int n, int k, float alpha, const void* a, int lda, const void* b, int ldb,
             cudaDataType_t in_type, float beta, void* c, cudaDataType_t out_type, int ldc, const char* what) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument(std::string(what) + ": negative dimension");
  if (m == 0 || n == 0) return;
  if (k == 0 && out_type != CUDA_R_32F) {  // bf16 C: C = 0 (beta 0) or C unchanged (beta 1) is asked for
    if (beta == 1.f) return;
    if (beta != 0.f) throw std::invalid_argument(std::string(what) + ": k = 0 with beta other than 0 or 1 on a bf16 C");
    check_cuda(cudaMemset2DAsync(c, static_cast<std::size_t>(ldc) * 2, 0, n * 2, m, compute_stream()),
               "cudaMemset2DAsync");
    return;
  }
  if (k == 0) {  // op(A) op(B) is empty: C = beta C, done here rather than relying on GEMM's edge case
    float* cf = static_cast<float*>(c);
    cublasHandle_t h = cublas_handle();
    if (beta == 0.f) {  // as BLAS: C is not read when beta is 0 (NaNs there do not survive)
      check_cuda(cudaMemset2DAsync(cf, static_cast<std::size_t>(ldc) * sizeof(float), 0, n * sizeof(float), m,
                                   compute_stream()),
                 "cudaMemset2DAsync");
    } else if (beta != 1.f) {  // C *= beta: one scal when rows are packed, else one per row (a rare edge case)
      if (ldc == n && static_cast<long long>(m) * n <= std::numeric_limits<int>::max()) {
        check_cublas(cublasSscal(h, m * n, &beta, cf, 1), what);
      } else {
        for (int row = 0; row < m; ++row) {
          check_cublas(cublasSscal(h, n, &beta, cf + static_cast<std::size_t>(row) * ldc, 1), what);
        }
      }
    }
    return;
  }
  check_cublas(cublasGemmEx(cublas_handle(), op(tb), op(ta), n, m, k, &alpha, b, in_type, ldb, a, in_type, lda, &beta, c,
                            out_type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               what);
}

}  // namespace

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("cuBLAS ") + what + ": " + cublasGetStatusName(status) + " (" +
                           cublasGetStatusString(status) + ")");
}

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")");
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: clear the error so later calls do not see it
    return 0;
  }
  return n;
}

std::string device_name() {
  if (device_count() == 0) return "";
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  return prop.name;
}

int compute_capability() {
  if (device_count() == 0) return 0;
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  return prop.major * 10 + prop.minor;
}

DeviceMemory device_memory() {
  DeviceMemory m;
  if (device_count() == 0) return m;
  check_cuda(cudaMemGetInfo(&m.free_bytes, &m.total_bytes), "cudaMemGetInfo");
  return m;
}

void set_compute_stream(cudaStream_t stream) {
  HandleState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.stream = stream;
  if (s.handle) bind(s);
}

cudaStream_t compute_stream() {
  HandleState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.stream;
}

cublasHandle_t cublas_handle() {
  HandleState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.handle) return s.handle;
  if (device_count() == 0) throw std::runtime_error("cuBLAS: no CUDA device in this process");
  check_cublas(cublasCreate(&s.handle), "cublasCreate");
  // Plain fp32 math: no TF32 for CUBLAS_COMPUTE_32F (TF32 only with CUBLAS_TF32_TENSOR_OP_MATH).
  check_cublas(cublasSetMathMode(s.handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check_cuda(cudaMalloc(&s.workspace, kWorkspaceBytes), "cudaMalloc (cuBLAS workspace)");
  bind(s);
  check_cublas(cublasSetSmCountTarget(s.handle, s.sm_target), "cublasSetSmCountTarget");
  return s.handle;
}

void set_gemm_sm_target(int sms) {
  if (sms < 0) throw std::invalid_argument("set_gemm_sm_target: a negative number of SMs");
  HandleState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.sm_target = sms;
  if (s.handle) check_cublas(cublasSetSmCountTarget(s.handle, sms), "cublasSetSmCountTarget");
}

int sm_count() {
  if (device_count() == 0) return 0;
  int dev = 0, sms = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  return sms;
}

void sgemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  gemm_ex(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, CUDA_R_32F, beta, c, CUDA_R_32F, ldc,
          "cublasGemmEx (fp32)");
}

void gemm_bf16_f32(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                   int lda, const std::uint16_t* b, int ldb, float beta, float* c, int ldc) {
  gemm_ex(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, CUDA_R_16BF, beta, c, CUDA_R_32F, ldc,
          "cublasGemmEx (bf16 in, fp32 out)");
}

void gemm_bf16_bf16(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                    int lda, const std::uint16_t* b, int ldb, float beta, std::uint16_t* c, int ldc) {
  gemm_ex(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, CUDA_R_16BF, beta, c, CUDA_R_16BF, ldc,
          "cublasGemmEx (bf16 in, bf16 out)");
}

double measure_gemm_flops(bool bf16, int n) {
  const std::size_t elems = static_cast<std::size_t>(n) * n;
  const std::size_t in_bytes = elems * (bf16 ? 2 : 4);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  double best = 0;
  try {
    check_cuda(cudaMalloc(&a, in_bytes), "cudaMalloc");
    check_cuda(cudaMalloc(&b, in_bytes), "cudaMalloc");
    check_cuda(cudaMalloc(&c, elems * 4), "cudaMalloc");
    cublas_handle();  // creates the handle (and checks there is a device) before timing
    const cudaStream_t s = compute_stream();
    // 0x3f bytes: every element about 0.75 (fp32 and bf16 alike), finite, not zero.
    check_cuda(cudaMemsetAsync(a, 0x3f, in_bytes, s), "cudaMemsetAsync");
    check_cuda(cudaMemsetAsync(b, 0x3f, in_bytes, s), "cudaMemsetAsync");
    check_cuda(cudaEventCreate(&start), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
    auto run = [&] {
      if (bf16) {
        gemm_bf16_f32(false, false, n, n, n, 1.f, static_cast<const std::uint16_t*>(a), n,
                      static_cast<const std::uint16_t*>(b), n, 0.f, static_cast<float*>(c), n);
      } else {
        sgemm(false, false, n, n, n, 1.f, static_cast<const float*>(a), n, static_cast<const float*>(b), n, 0.f,
              static_cast<float*>(c), n);
      }
    };
    run();  // warm-up: kernel selection, clocks
    for (int rep = 0; rep < 5; ++rep) {
      check_cuda(cudaEventRecord(start, s), "cudaEventRecord");
      run();
      check_cuda(cudaEventRecord(stop, s), "cudaEventRecord");
      check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      best = std::max(best, 2.0 * n * static_cast<double>(n) * n / std::max(ms * 1e-3, 1e-9));
    }
  } catch (...) {
    release(a, b, c, start, stop);
    throw;
  }
  release(a, b, c, start, stop);
  return best;
}

}  // namespace shardft::cuda
