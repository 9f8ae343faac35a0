#include "kernels/compute_device.hpp"

#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/device_backend.hpp"
#include "kernels/gpu_toolkit.hpp"
#include "kernels/types.hpp"

namespace shardft {

ComputeDevice compute_device() {
  ComputeDevice d;
  d.name = "the host CPU";
  if (!kComputeOnDevice) {
    d.amx_tiles = amx::available();
    return d;
  }
  const device_backend::ComputeGpu gpu = device_backend::compute_gpu();
  if (gpu.present) {
    d.gpu = true;
    d.name = gpu.name;
    d.compute_capability = gpu.compute_capability;
    double total = 0;
    device_backend::device_memory(d.free_memory_bytes, total);
  }
  return d;
}

bool has_bf16_tensor_cores(const ComputeDevice& d) { return d.gpu && d.compute_capability >= 80; }

bool bf16_runs_faster(const ComputeDevice& d) { return d.gpu ? has_bf16_tensor_cores(d) : d.amx_tiles; }

std::string describe_bf16_support(const ComputeDevice& d) {
  if (!d.gpu && d.amx_tiles) return "the model computes on the host CPU, whose AMX tiles run the bf16 GEMMs";
  if (!d.gpu) return "the model computes on the host CPU, where bf16 is emulated (slower than fp32)";
  const std::string sm = " (sm_" + std::to_string(d.compute_capability) + ")";
  return d.name + sm + (has_bf16_tensor_cores(d) ? " has bf16 tensor cores" : " has no bf16 tensor cores");
}

std::string visible_gpu_name() { return gpu_toolkit::visible_gpu_name(); }

double measured_gpu_gemm_flops(bool bf16) {
  if (!compute_device().gpu) return 0;
  return device_backend::measure_gemm_flops(bf16);
}

}  // namespace shardft
