#pragma once
// The device the model's views live on, as a recipe's `bf16: auto` asks about it: a CUDA GPU (its name
// and compute capability) where the build's default memory space is CUDA's, else the host.
#include <string>

namespace shardft {

struct ComputeDevice {
  bool gpu = false;
  std::string name;            // "NVIDIA H100 80GB HBM3"; "the host CPU" off the GPU
  int compute_capability = 0;  // major * 10 + minor (90 for sm_90); 0 off the GPU
};
ComputeDevice compute_device();

// bf16 auto's rule: bf16 tensor cores from compute capability 8.0 (Ampere) on. Off a GPU bf16 is emulated
// (widened to fp32 for the BLAS), slower than fp32: never.
bool has_bf16_tensor_cores(const ComputeDevice& d);
// "NVIDIA H100 80GB HBM3 (sm_90) has bf16 tensor cores", "a CPU build: bf16 would be emulated, ...".
std::string describe_bf16_support(const ComputeDevice& d);

// A CUDA GPU this process sees, whether or not the model's views live on it (a build with the CUDA
// toolkit whose Kokkos has no CUDA backend computes on the host): its name, "" where there is none.
std::string visible_gpu_name();
// The FLOP/s the model's GEMMs reach on its GPU (a square cuBLAS GEMM, bf16 inputs or fp32, timed after
// a warm-up): the attainable peak of a GPU missing from the datasheet table. 0 where the model computes
// on the host.
double measured_gpu_gemm_flops(bool bf16);

}  // namespace shardft
