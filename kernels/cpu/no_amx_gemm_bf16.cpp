// kernels/amx_gemm_bf16.hpp where the build has no AMX kernel: a CUDA build (its bf16 products run on
// cuBLAS) or a compiler without AMX intrinsics. kernels/gemm.cpp then widens tiles into sgemm.
#include <stdexcept>

#include "kernels/amx_gemm_bf16.hpp"

namespace shardft::amx {

bool available() { return false; }
std::string describe() { return "no AMX (this build has no AMX kernel)"; }
void set_enabled(bool) {}
void gemm_bf16(bool, bool, int, int, int, float, const std::uint16_t*, int, const std::uint16_t*, int, float, float*,
               std::uint16_t*, int) {
  throw std::logic_error("amx::gemm_bf16: this build has no AMX kernel");
}

}  // namespace shardft::amx
