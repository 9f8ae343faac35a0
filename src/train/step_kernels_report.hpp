#pragma once
// A training step's device counts as a run reports them (train/trainer.hpp StepKernels): the log line
// at the end of a run and the fields of metrics.jsonl's closing record. These are what a CPU build can
// show of a GPU step: the share of GEMM FLOPs on the bf16 tensor-core path, the bf16 elements a GPU
// would widen to fp32, kernel launches per decoder layer, host syncs and device allocations per step.
#include <nlohmann/json.hpp>
#include <string>

#include "train/trainer.hpp"

namespace shardft {

// gemm_tensor_core_flop_share, gemm_widened_elements_per_step, kernel_launches_per_layer,
// host_syncs_per_step, device_allocations_per_step (and gemm_flops_per_step,
// kernel_launches_outside_layers_per_step), of step `step`.
nlohmann::json step_kernel_fields(const StepKernels& k, int layers);
// The launches inside the decoder layers, per layer and micro-batch: what one layer's forward and
// backward launch (the embedding, the LM head and the optimizer are counted apart).
double launches_per_layer(const StepKernels& k, int layers);
// "device work of step 5: GEMM FLOPs 100.0% on bf16 tensor cores (1.2 TFLOP), 0 elements widened to
// fp32, 30.0 kernel launches per decoder layer (520 in all, 40 outside the layers: embedding, LM head,
// optimizer), 1 host sync, 0 device allocations"
std::string describe_step_kernels(const StepKernels& k, int layers, long step);

}  // namespace shardft
