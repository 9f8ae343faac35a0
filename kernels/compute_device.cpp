#include "kernels/compute_device.hpp"

#include "kernels/types.hpp"
#if defined(SHARDFT_HAVE_CUDA)
#include "kernels/cuda/cublas_gemm.hpp"
#endif

namespace shardft {

ComputeDevice compute_device() {
  ComputeDevice d;
  d.name = "the host CPU";
#if defined(SHARDFT_HAVE_CUDA) && defined(KOKKOS_ENABLE_CUDA)
  if (!Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible && cuda::device_count() > 0) {
    d.gpu = true;
    d.name = cuda::device_name();
    d.compute_capability = cuda::compute_capability();
  }
#endif
  return d;
}

bool has_bf16_tensor_cores(const ComputeDevice& d) { return d.gpu && d.compute_capability >= 80; }

std::string describe_bf16_support(const ComputeDevice& d) {
  if (!d.gpu) return "the model computes on the host CPU, where bf16 is emulated (slower than fp32)";
  const std::string sm = " (sm_" + std::to_string(d.compute_capability) + ")";
  return d.name + sm + (has_bf16_tensor_cores(d) ? " has bf16 tensor cores" : " has no bf16 tensor cores");
}

std::string visible_gpu_name() {
#if defined(SHARDFT_HAVE_CUDA)
  return cuda::device_name();
#else
  return "";
#endif
}

double measured_gpu_gemm_flops(bool bf16) {
  if (!compute_device().gpu) return 0;
#if defined(SHARDFT_HAVE_CUDA) && defined(KOKKOS_ENABLE_CUDA)
  return cuda::measure_gemm_flops(bf16);
#else
  (void)bf16;
  return 0;
#endif
}

}  // namespace shardft
