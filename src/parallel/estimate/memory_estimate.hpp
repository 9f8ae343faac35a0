#pragma once
// Model-state memory per GPU and per CPU for ZeRO stages 1-3, with and without CPU offload, by the
// formulas DeepSpeed's estimators use (mixed precision: 2-byte weights and gradients, 12 bytes of
// fp32 master + Adam moments per parameter, 1.5x buffer factor on CPU), so the numbers can be
// compared with what DeepSpeed users already know. Plus activation memory of shardft's own step.
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.hpp"

namespace shardft {

struct EstimateRow {
  int stage = 3;
  std::string options;      // "offload_param=cpu , offload_optimizer=cpu , zero_init=1"
  double cpu_bytes = 0;     // per CPU (node)
  double gpu_bytes = 0;     // per GPU (rank)
};

struct EstimateInput {
  double total_params = 0, largest_layer_params = 0;
  int gpus_per_node = 1, nodes = 1;
  double buffer_factor = 1.5;
};

// DeepSpeed's estimate_zero2_model_states_mem_needs rows (offload_optimizer cpu / none).
std::vector<EstimateRow> estimate_zero2(const EstimateInput& in);
// The ZeRO-1 equivalent: weights and gradients whole, optimizer state sharded (paper: 4 psi + 12 psi / N).
std::vector<EstimateRow> estimate_zero1(const EstimateInput& in);
// DeepSpeed's estimate_zero3_model_states_mem_needs_all_live: six rows (offload_param x offload_optimizer x zero_init).
std::vector<EstimateRow> estimate_zero3(const EstimateInput& in);

// Parameters of a decoder and of its largest block (the embedding or the LM head, usually).
struct ModelSize {
  double total = 0, largest_layer = 0;
};
ModelSize model_size(const ModelConfig& cfg);

// Bytes shardft keeps for backward in one micro-batch of batch x seq tokens (no activation checkpointing):
// per layer 4 bytes x (4d + 2 q_dim + 2 kv_dim + 3 I + heads x seq) per token, plus the head's logits.
double activation_bytes(const ModelConfig& cfg, int batch, int seq);

// Bytes one rank sends per optimizer step (accumulation 1), split as shardft's ledger splits them: a
// collective whose group spans nodes counts as inter-node. weight_bytes / grad_bytes are the bytes per
// element on the wire (2 for bf16 communication, 4 for fp32).
struct TrafficRow {
  std::string config;
  double intra_node = 0, inter_node = 0;
};
std::vector<TrafficRow> estimate_traffic(double psi, int nodes, int gpus_per_node, double weight_bytes,
                                         double grad_bytes, int quant_block = 64);

// "188.72GB": bytes / 2^30 with two decimals, as DeepSpeed prints them.
std::string format_gb(double bytes);

// Parses a count such as "7504924672", "7504M", "7.5B", "525K", or a size such as "200MB", "5GB".
double parse_count(const std::string& text, const std::string& flag);

}  // namespace shardft
