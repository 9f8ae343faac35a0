#pragma once
// Model FLOPs utilisation: the FLOPs a step must do, divided by what the hardware could do in the
// same time. Training FLOPs per token follow the usual count (PaLM, Megatron):
//   6 * P_matmul + 12 * L * H * hd * T
// P_matmul: the parameters used as GEMM weights (every layer's projections and the LM head; the
// embedding lookup, norms and biases do no matmul), 6 = forward 2 + backward 4 per weight;
// 12 * L * H * hd * T: QK^T and PV over H heads of head_dim hd (H * hd = hidden_size unless config.json
// sets another head_dim), forward and backward, for a token attending to a sequence of T
// (T: the mean sample length; packed rows attend within a sample). Recomputation for activation
// checkpointing is not counted, as MFU (unlike HFU) does not count it.
#include <string>

#include "config/model_config.hpp"

namespace shardft {

double training_flops_per_token(const ModelConfig& m, double mean_sequence_length);

// Dense peak TFLOP/s of one GPU, from NVIDIA's datasheets, for the compute dtype; `name` as
// cudaGetDeviceProperties reports it ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200").
//   bf16 = true:  BF16 tensor core, fp32 accumulate, dense (the datasheets' starred figures are with
//                 2:4 sparsity, twice these). MFU in bf16 is quoted against this peak (PaLM, Megatron).
//   bf16 = false: FP32 on the CUDA cores (non-tensor). Not TF32: shardft's fp32 GEMMs run with
//                 CUBLAS_COMPUTE_32F and TF32 off (TF32 keeps 10 mantissa bits and would break the
//                 fp32 equivalence tests), so plain fp32 is the ceiling of the arithmetic it does.
// 0 when the GPU is not in the table, or has no such peak (V100: no bf16 tensor cores), or is a MIG
// slice (a fraction of the GPU); the caller then measures.
double known_gpu_peak_tflops(const std::string& name, bool bf16);

// The peak MFU divides by, and where it came from (the startup log prints both).
struct PeakFlops {
  double flops = 0;   // FLOP/s of one rank
  std::string basis;  // "peak_tflops", "datasheet ...", "measured ..."
};

// Peak FLOP/s of one rank, in this order:
//  1. `peak_tflops` when it is > 0;
//  2. GPU build whose model runs on the GPU (CUDA Kokkos) with a device: the datasheet peak of the
//     device for the compute dtype (known_gpu_peak_tflops), else a cuBLAS GEMM rate measured now
//     (bf16 or fp32, square, 4096) with a note that peak_tflops would give the datasheet figure;
//  3. otherwise, where `bf16` products run on the CPU's AMX tiles (kernels/amx_gemm_bf16.hpp), the bf16
//     GEMM rate this rank measures now through them;
//  4. otherwise the fp32 GEMM rate this rank measures now (a square sgemm through the same BLAS the
//     model uses; the CPU's attainable peak).
// `half`: the step computes in bf16 or fp16 (a GPU's tensor-core peak); `bf16`: its GEMM operands are bf16.
PeakFlops resolve_peak_flops(double peak_tflops, bool half, bool bf16 = false);

// resolve_peak_flops(peak_tflops, false).flops.
double peak_flops_per_rank(double peak_tflops);

}  // namespace shardft
