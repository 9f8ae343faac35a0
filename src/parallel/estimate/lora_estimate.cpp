#include "parallel/estimate/lora_estimate.hpp"

#include <algorithm>

#include "kernels/nf4_quantize.hpp"
#include "model/param_layout.hpp"

namespace shardft {

LoraSize lora_size(const ModelConfig& model, const LoraSpec& lora) {
  const ParamLayout layout(model, lora);
  const auto& params = layout.params();
  LoraSize s;
  for (const ParamSpec& p : params) {
    const double n = static_cast<double>(p.numel());
    (p.frozen ? s.frozen : s.trainable) += n;
    if (p.nf4) {
      s.frozen_nf4 += n;
      s.nf4_bytes += static_cast<double>(nf4_storage_bytes(p.numel()));
    }
  }
  for (const ParamBlock& b : layout.blocks()) {
    double trainable = 0, frozen = 0;
    for (int p : b.params) (params[p].frozen ? frozen : trainable) += static_cast<double>(params[p].numel());
    s.largest_trainable_block = std::max(s.largest_trainable_block, trainable);
    s.largest_frozen_block = std::max(s.largest_frozen_block, frozen);
  }
  return s;
}

namespace {

// DeepSpeed's per-GPU model states for `params` parameters at `stage`, offload none (stage 0: all replicated).
double deepspeed_gpu_bytes(int stage, double params, double largest_block, int nodes, int gpus_per_node) {
  EstimateInput in;
  in.total_params = params;
  in.largest_layer_params = largest_block;
  in.nodes = nodes;
  in.gpus_per_node = gpus_per_node;
  auto no_offload = [](const std::vector<EstimateRow>& rows) {
    for (const EstimateRow& r : rows) {
      if (r.options.find("offload_optimizer=none") != std::string::npos) return r.gpu_bytes;
    }
    return 0.0;
  };
  switch (stage) {
    case 0: return 16 * params;
    case 1: return no_offload(estimate_zero1(in));
    case 2: return no_offload(estimate_zero2(in));
    default: return no_offload(estimate_zero3(in));
  }
}

}  // namespace

std::vector<LoraStateRow> estimate_lora_states(const LoraSize& lora, const ModelSize& full, int nodes,
                                               int gpus_per_node, double compute_bytes) {
  const double n = static_cast<double>(nodes) * gpus_per_node;
  std::vector<LoraStateRow> rows;
  for (int stage = 0; stage <= 3; ++stage) {
    LoraStateRow r;
    r.stage = stage;
    r.trainable = deepspeed_gpu_bytes(stage, lora.trainable, lora.largest_trainable_block, nodes, gpus_per_node);
    r.frozen = lora.frozen_bytes(compute_bytes) / (stage == 3 ? n : 1.0);
    r.gathered = stage == 3 ? compute_bytes * lora.largest_frozen_block : 0;
    r.full = deepspeed_gpu_bytes(stage, full.total, full.largest_layer, nodes, gpus_per_node);
    rows.push_back(r);
  }
  return rows;
}

std::vector<TrafficRow> estimate_lora_traffic(const LoraSize& lora, int nodes, int gpus_per_node, double weight_bytes,
                                              double grad_bytes) {
  const double n = static_cast<double>(nodes) * gpus_per_node, share = n > 1 ? (n - 1) / n : 0.0;
  // The trainable part moves as any model's parameters do (the first three rows: stages 0, 1/2, 3).
  const std::vector<TrafficRow> trainable = estimate_traffic(lora.trainable, nodes, gpus_per_node, weight_bytes, grad_bytes);
  std::vector<TrafficRow> rows = {trainable[0], trainable[1], trainable[2]};
  rows[0].config = "stage 0 LoRA (all-reduce A/B gradients)";
  rows[1].config = "stage 1/2 LoRA (A/B reduce-scatter + all-gather)";
  rows[2].config = "stage 3 LoRA (base gathered 2x + A/B as stage 3)";
  const double base_gathers = 2 * lora.frozen_bytes(weight_bytes) * share;
  (nodes > 1 ? rows[2].inter_node : rows[2].intra_node) += base_gathers;
  return rows;
}

}  // namespace shardft
