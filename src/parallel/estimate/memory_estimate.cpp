#include "parallel/estimate/memory_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "model/param_layout.hpp"

namespace shardft {

std::vector<EstimateRow> estimate_zero1(const EstimateInput& in) {
  const double n = static_cast<double>(in.gpus_per_node) * in.nodes, psi = in.total_params;
  return {
      {1, "offload_optimizer=cpu ", psi * std::max(4.0 * n, 16.0) * in.buffer_factor, 4 * psi},
      {1, "offload_optimizer=none", psi * 4 * in.gpus_per_node * in.buffer_factor, 4 * psi + std::floor(12 * psi / n)},
  };
}

std::vector<EstimateRow> estimate_zero2(const EstimateInput& in) {
  const double n = static_cast<double>(in.gpus_per_node) * in.nodes, psi = in.total_params;
  return {
      {2, "offload_optimizer=cpu ", psi * std::max(4.0 * n, 16.0) * in.buffer_factor, 2 * psi},
      {2, "offload_optimizer=none", psi * 4 * in.gpus_per_node * in.buffer_factor, 4 * psi + std::floor(16 * psi / n)},
  };
}

std::vector<EstimateRow> estimate_zero3(const EstimateInput& in) {
  const double n = static_cast<double>(in.gpus_per_node) * in.nodes, psi = in.total_params;
  const double per_node = 1.0 / in.nodes, largest = 4 * in.largest_layer_params, f = in.buffer_factor;
  std::vector<EstimateRow> rows;
  for (int zero_init : {1, 0}) {  // offload both
    const double cpu = zero_init ? psi * 18 * per_node * f : psi * std::max(4.0 * in.gpus_per_node, 18 * per_node) * f;
    rows.push_back({3, "offload_param=cpu , offload_optimizer=cpu , zero_init=" + std::to_string(zero_init), cpu, largest});
  }
  for (int zero_init : {1, 0}) {  // offload the optimizer only
    const double cpu = zero_init ? psi * 16 * per_node * f : psi * std::max(4.0 * in.gpus_per_node, 16 * per_node) * f;
    rows.push_back({3, "offload_param=none, offload_optimizer=cpu , zero_init=" + std::to_string(zero_init), cpu,
                    largest + std::floor(2 * psi / n)});
  }
  for (int zero_init : {1, 0}) {  // everything on the GPU
    const double cpu = zero_init ? in.largest_layer_params * 4 * in.gpus_per_node * f : psi * 4 * in.gpus_per_node * f;
    rows.push_back({3, "offload_param=none, offload_optimizer=none, zero_init=" + std::to_string(zero_init), cpu,
                    largest + std::floor(18 * psi / n)});
  }
  return rows;
}

ModelSize model_size(const ModelConfig& cfg) {
  const ParamLayout layout(cfg);
  ModelSize s;
  s.total = static_cast<double>(layout.total_numel());
  for (const auto& b : layout.blocks()) {
    double n = 0;
    for (int p : b.params) n += static_cast<double>(layout.params()[p].numel());
    s.largest_layer = std::max(s.largest_layer, n);
  }
  return s;
}

double activation_bytes(const ModelConfig& c, int batch, int seq) {
  const double tokens = static_cast<double>(batch) * seq, d = c.hidden_size, hd = c.head_dim();
  const double qd = c.num_attention_heads * hd, kvd = c.num_key_value_heads * hd;
  // qk_norm (Qwen3) keeps q and k before their norms too, and one 1 / rms per token and head of each.
  const double qk_norm = c.qk_norm ? qd + kvd + c.num_attention_heads + c.num_key_value_heads : 0.0;
  const double per_layer_per_token = 4 * d + 2 * qd + 2 * kvd + 3.0 * c.intermediate_size + 2 +
                                     static_cast<double>(c.num_attention_heads) * seq + qk_norm;
  const double head = tokens * (d + 1 + c.vocab_size) + tokens * d;  // final norm, logits, embeddings
  return 4 * (tokens * per_layer_per_token * c.num_hidden_layers + head);
}

std::vector<TrafficRow> estimate_traffic(double psi, int nodes, int gpus_per_node, double wb, double gb, int block) {
  const double n = static_cast<double>(nodes) * gpus_per_node, m = gpus_per_node, k = nodes;
  const double share = n > 1 ? (n - 1) / n : 0.0;
  const bool multi = nodes > 1;
  auto row = [&](std::string name, double bytes_world, double intra_only) {
    TrafficRow r{std::move(name), intra_only, 0};
    (multi ? r.inter_node : r.intra_node) += bytes_world;
    return r;
  };
  const double int8 = 1.0 + 4.0 / block, int4 = 0.5 + 4.0 / block;  // bytes per element with the scales
  std::vector<TrafficRow> rows;
  rows.push_back(row("stage 0 (all-reduce)", 2 * psi * share * gb, 0));
  rows.push_back(row("stage 1/2 (reduce-scatter + all-gather)", psi * share * (gb + wb), 0));
  rows.push_back(row("stage 3 (2 all-gathers + reduce-scatter)", psi * share * (2 * wb + gb), 0));
  // Hybrid: the model is sharded inside a node, the gradient shard all-reduced across nodes.
  TrafficRow hybrid{"stage 3 hybrid (shard in node, replicate across)",
                    psi * ((m - 1) / m) * (2 * wb + gb), multi ? 2 * (psi / m) * ((k - 1) / k) * gb : 0};
  rows.push_back(hybrid);
  // ZeRO++: qwZ forward gathers int8 over all ranks; hpZ backward gathers inside the node; qgZ sends
  // int4 inside the node, then the node's partial sums (1/m of the data) across nodes.
  TrafficRow zpp{"stage 3 ZeRO++ (qwZ + hpZ + qgZ)", 0, 0};
  (multi ? zpp.inter_node : zpp.intra_node) += psi * share * int8;
  zpp.intra_node += psi * ((m - 1) / m) * wb + psi * ((m - 1) / m) * int4;
  (multi ? zpp.inter_node : zpp.intra_node) += (psi / m) * ((k - 1) / k) * int4;
  rows.push_back(zpp);
  return rows;
}

std::string format_gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fGB", bytes / 1073741824.0);
  return buf;
}

double parse_count(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string rest = text.substr(used);
  if (rest.size() == 2 && (rest[1] == 'B' || rest[1] == 'b')) rest.pop_back();  // sizes: 200MB, 5GB
  double scale = 1;
  if (rest == "K" || rest == "k") scale = 1e3;
  else if (rest == "M" || rest == "m") scale = 1e6;
  else if (rest == "B" || rest == "b" || rest == "G" || rest == "g") scale = 1e9;
  else if (!rest.empty()) used = 0;
  if (used == 0 || !(v > 0)) {
    throw std::invalid_argument(flag + ": expected a positive count such as 7504924672, 7504M or 7.5B, got '" + text + "'");
  }
  return v * scale;
}

}  // namespace shardft
