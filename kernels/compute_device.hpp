#pragma once
// The device the model's views live on, as a recipe's `bf16: auto` asks about it: a CUDA GPU (its name
// and compute capability) where the build's default memory space is CUDA's, else the host.
#include <string>

namespace shardft {

struct ComputeDevice {
  bool gpu = false;
  std::string name;            // "NVIDIA H100 80GB HBM3"; "the host CPU" off the GPU
  int compute_capability = 0;  // major * 10 + minor (90 for sm_90); 0 off the GPU
  bool amx_tiles = false;      // off the GPU: the CPU runs bf16 products on AMX tiles (kernels/amx_gemm_bf16.hpp)
  double free_memory_bytes = 0;  // the GPU's free memory when compute_device() asked; 0 off the GPU
};
ComputeDevice compute_device();

// bf16 tensor cores: compute capability 8.0 (Ampere) on.
bool has_bf16_tensor_cores(const ComputeDevice& d);
// bf16 auto's rule: on a GPU with bf16 tensor cores, and on a CPU whose AMX tiles run the bf16 products
// (faster than fp32 there); not on other CPUs, where bf16 is emulated (widened to fp32 for the BLAS),
// slower than fp32.
bool bf16_runs_faster(const ComputeDevice& d);
// "NVIDIA H100 80GB HBM3 (sm_90) has bf16 tensor cores", "the model computes on the host CPU, ...".
std::string describe_bf16_support(const ComputeDevice& d);

// A CUDA GPU this process sees, whether or not the model's views live on it (a build with the CUDA
// toolkit whose Kokkos has no CUDA backend computes on the host): its name, "" where there is none.
std::string visible_gpu_name();
// The FLOP/s the model's GEMMs reach on its GPU (a square cuBLAS GEMM, bf16 inputs or fp32, timed after
// a warm-up): the attainable peak of a GPU missing from the datasheet table. 0 where the model computes
// on the host.
double measured_gpu_gemm_flops(bool bf16);

}  // namespace shardft
