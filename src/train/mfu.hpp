#pragma once
// Model FLOPs utilisation: the FLOPs a step must do, divided by what the hardware could do in the
// same time. Training FLOPs per token follow the usual count (PaLM, Megatron):
//   6 * P_matmul + 12 * L * d * T
// P_matmul: the parameters used as GEMM weights (every layer's projections and the LM head; the
// embedding lookup, norms and biases do no matmul), 6 = forward 2 + backward 4 per weight;
// 12 * L * d * T: QK^T and PV, forward and backward, for a token attending to a sequence of T
// (T: the mean sample length; packed rows attend within a sample). Recomputation for activation
// checkpointing is not counted, as MFU (unlike HFU) does not count it.
#include "config/model_config.hpp"

namespace shardft {

double training_flops_per_token(const ModelConfig& m, double mean_sequence_length);

// Peak FLOP/s of one rank: `peak_tflops` when it is > 0, else the fp32 GEMM rate this rank measures
// now (a square sgemm through the same BLAS the model uses; the CPU's attainable peak).
double peak_flops_per_rank(double peak_tflops);

}  // namespace shardft
