#pragma once
// What LoRA and QLoRA cost per GPU, in the style of DeepSpeed's estimators (parallel/estimate/memory_estimate.hpp),
// so a DeepSpeed + PEFT user can set them beside the full fine-tuning numbers they know. The trainable A
// and B cost what DeepSpeed's formulas say for that many parameters (2-byte weights and gradients, 12 bytes
// of fp32 master + Adam, sharded by the stage); the frozen base costs only its weights (compute dtype,
// NF4 for QLoRA's decoder linears), whole at stages 0-2 and sharded at stage 3. Counts come from the
// trainer's own layout (model/param_layout), so the targets expand exactly as in a run.
#include <vector>

#include "config/lora_config.hpp"
#include "config/model_config.hpp"
#include "parallel/estimate/memory_estimate.hpp"

namespace shardft {

struct LoraSize {
  double trainable = 0;   // A and B of every targeted linear of every layer: r * (in + out) each
  double frozen = 0;      // every base parameter
  double frozen_nf4 = 0;  // of those, the ones held as NF4 (QLoRA's decoder linears); 0 without load_in_4bit
  double nf4_bytes = 0;   // their NF4 storage, matrix by matrix (kernels/nf4_quantize.hpp)
  // Parameters of the largest block (the unit stage 3 gathers), trainable and frozen apart.
  double largest_trainable_block = 0, largest_frozen_block = 0;
  // Bytes of the whole frozen base with `compute_bytes` per non-NF4 parameter.
  double frozen_bytes(double compute_bytes) const { return compute_bytes * (frozen - frozen_nf4) + nf4_bytes; }
};
LoraSize lora_size(const ModelConfig& model, const LoraSpec& lora);

// Model states of one GPU at one stage, no offload.
struct LoraStateRow {
  int stage = 0;
  double trainable = 0;  // DeepSpeed's formula for LoraSize::trainable parameters at this stage (at stage 3
                         // with its "largest layer" term for the largest trainable block)
  double frozen = 0;     // the frozen base's weights: whole at stages 0-2, 1/N at stage 3
  double gathered = 0;   // stage 3: the largest frozen block gathered in the compute dtype
  double full = 0;       // full fine-tuning of the same model by DeepSpeed's formula
  double total() const { return trainable + frozen + gathered; }
};
// compute_bytes: bytes of a frozen non-NF4 parameter (2 with bf16 / fp16 compute, 4 with fp32).
// Stage 0 (no DeepSpeed estimator) is 16 bytes a trainable parameter, all replicated.
std::vector<LoraStateRow> estimate_lora_states(const LoraSize& lora, const ModelSize& full, int nodes,
                                               int gpus_per_node, double compute_bytes);

// Bytes one GPU sends per optimizer step with LoRA, as estimate_traffic counts them: stages 0-2 reduce
// (and refresh) only the trainable part; stage 3 also gathers the frozen base twice (forward and
// backward), in NF4 bytes for QLoRA's matrices and `weight_bytes` per other parameter.
std::vector<TrafficRow> estimate_lora_traffic(const LoraSize& lora, int nodes, int gpus_per_node, double weight_bytes,
                                              double grad_bytes);

}  // namespace shardft
