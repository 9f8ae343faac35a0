// kernels/gpu_toolkit.hpp with the CUDA toolkit (host-compiled: the runtime API only).
#include "kernels/gpu_toolkit.hpp"

#include "kernels/cuda/cublas_gemm.hpp"

namespace shardft::gpu_toolkit {

std::string gemm_library() { return "cuBLAS"; }
std::string visible_gpu_name() { return cuda::device_name(); }

}  // namespace shardft::gpu_toolkit
