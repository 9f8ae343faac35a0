// `shardft estimate`: the DeepSpeed-style memory table for ZeRO stages 1-3, from the recipe's model
// or from --total_params / --largest_layer_params, plus the activation memory of a micro-batch.
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "config/train_config.hpp"
#include "parallel/memory_estimate.hpp"

namespace shardft::cli {

namespace {

void print_table(const std::vector<EstimateRow>& rows, std::ostream& out) {
  out << "  per CPU  |  per GPU |   Options\n";
  char line[160];
  for (const EstimateRow& r : rows) {
    std::snprintf(line, sizeof line, "%9s | %8s | %s\n", format_gb(r.cpu_bytes).c_str(), format_gb(r.gpu_bytes).c_str(),
                  r.options.c_str());
    out << line;
  }
}

}  // namespace

int estimate(const std::vector<std::string>& args, std::ostream& out) {
  EstimateInput in;
  std::string total, largest;
  int micro_batch = 0, seq_len = 0;
  Invocation recipe;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string key = args[i], value;
    const auto eq = key.find('=');
    const bool ours = key == "--total_params" || key == "--largest_layer_params" || key == "--gpus_per_node" ||
                      key == "--nodes" || key == "--micro_batch" || key == "--seq_len" ||
                      (eq != std::string::npos && (key.rfind("--total_params=", 0) == 0 ||
                                                   key.rfind("--largest_layer_params=", 0) == 0 ||
                                                   key.rfind("--gpus_per_node=", 0) == 0 || key.rfind("--nodes=", 0) == 0 ||
                                                   key.rfind("--micro_batch=", 0) == 0 || key.rfind("--seq_len=", 0) == 0));
    if (!ours) {
      rest.push_back(args[i]);
      continue;
    }
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) throw ConfigError(key + ": expected a value after it");
      value = args[++i];
    }
    auto as_int = [&](const std::string& v) {
      const double x = parse_count(v, key);
      if (x != static_cast<int>(x)) throw ConfigError(key + ": expected a whole number, got '" + v + "'");
      return static_cast<int>(x);
    };
    if (key == "--total_params") total = value;
    else if (key == "--largest_layer_params") largest = value;
    else if (key == "--gpus_per_node") in.gpus_per_node = as_int(value);
    else if (key == "--nodes") in.nodes = as_int(value);
    else if (key == "--micro_batch") micro_batch = as_int(value);
    else if (key == "--seq_len") seq_len = as_int(value);
  }
  recipe = parse_invocation(rest);
  const TrainConfig cfg = load_train_config(recipe.config_path, recipe.overrides, recipe.deepspeed_path);
  const bool from_counts = !total.empty();
  if (from_counts != !largest.empty()) {
    throw ConfigError("--total_params and --largest_layer_params go together");
  }
  if (from_counts) {
    in.total_params = parse_count(total, "--total_params");
    in.largest_layer_params = parse_count(largest, "--largest_layer_params");
  } else {
    const ModelSize s = model_size(cfg.model);
    in.total_params = s.total;
    in.largest_layer_params = s.largest_layer;
  }
  char head[256];
  std::snprintf(head, sizeof head,
                "Estimated memory needed for params, optim states and gradients for a:\n"
                "HW: Setup with %d node%s, %d GPU%s per node.\n"
                "SW: Model with %lldM total params, %lldM largest layer params.\n",
                in.nodes, in.nodes > 1 ? "s" : "", in.gpus_per_node, in.gpus_per_node > 1 ? "s" : "",
                static_cast<long long>(in.total_params / 1e6), static_cast<long long>(in.largest_layer_params / 1e6));
  out << head;
  out << "ZeRO-1\n";
  print_table(estimate_zero1(in), out);
  out << "ZeRO-2\n";
  print_table(estimate_zero2(in), out);
  out << "ZeRO-3\n";
  print_table(estimate_zero3(in), out);
  const double wire = cfg.bf16 ? 2.0 : 4.0;
  out << "Bytes on the wire per optimizer step per GPU (" << (cfg.bf16 ? "bf16" : "fp32")
      << " weights and gradients; a group spanning nodes counts as inter-node):\n";
  char line[200];
  for (const TrafficRow& r : estimate_traffic(in.total_params, in.nodes, in.gpus_per_node, wire, wire,
                                              cfg.zero_quantization_block_size)) {
    std::snprintf(line, sizeof line, "  %-50s intra-node %10s  inter-node %10s\n", r.config.c_str(),
                  format_gb(r.intra_node).c_str(), format_gb(r.inter_node).c_str());
    out << line;
  }
  if (!from_counts) {
    const int b = micro_batch > 0 ? micro_batch : cfg.per_device_train_batch_size;
    const int t = seq_len > 0 ? seq_len : cfg.max_seq_length;
    out << "Activations kept for backward per rank, micro-batch " << b << " x " << t
        << " tokens: " << format_gb(activation_bytes(cfg.model, b, t)) << "\n";
  }
  return 0;
}

}  // namespace shardft::cli
