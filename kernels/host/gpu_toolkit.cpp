// kernels/gpu_toolkit.hpp without a GPU toolkit.
#include "kernels/gpu_toolkit.hpp"

namespace shardft::gpu_toolkit {

std::string gemm_library() { return ""; }
std::string visible_gpu_name() { return ""; }

}  // namespace shardft::gpu_toolkit
