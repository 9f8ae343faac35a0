#pragma once
// Whether the build links a GPU toolkit, and the GPU it sees, whatever the compute space is (a build
// with the CUDA toolkit whose Kokkos runs on the host still names the GPU and its idle GEMM library).
// CMake compiles kernels/cuda/gpu_toolkit.cpp where the CUDA toolkit is found, kernels/host/gpu_toolkit.cpp
// elsewhere.
#include <string>

namespace shardft::gpu_toolkit {

std::string gemm_library();       // "cuBLAS"; "" without a toolkit
std::string visible_gpu_name();   // the first visible GPU's name; "" where there is none

}  // namespace shardft::gpu_toolkit
