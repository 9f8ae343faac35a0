// `shardft estimate`: the DeepSpeed-style memory table for ZeRO stages 1-3, from the recipe's model
// or from --total_params / --largest_layer_params, plus the activation memory of a micro-batch; with LoRA on
// (use_peft, peft_type: lora, or --adapter), what LoRA / QLoRA cost beside it.
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "config/adapter_lora_keys.hpp"
#include "config/lora_config.hpp"
#include "config/train_config.hpp"
#include "parallel/estimate/lora_estimate.hpp"
#include "parallel/estimate/memory_estimate.hpp"
#include "config/recipe_sections.hpp"
#include "train/trainer.hpp"

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

void print_traffic(const std::vector<TrafficRow>& rows, std::ostream& out) {
  char line[200];
  for (const TrafficRow& r : rows) {
    std::snprintf(line, sizeof line, "  %-50s intra-node %10s  inter-node %10s\n", r.config.c_str(),
                  format_gb(r.intra_node).c_str(), format_gb(r.inter_node).c_str());
    out << line;
  }
}

// 39976960 as "39,976,960", as PEFT's print_trainable_parameters writes counts.
std::string with_commas(double count) {
  std::string digits = std::to_string(static_cast<long long>(count)), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

void print_lora(const ModelConfig& model, ComputeDtype dtype_of_run, const LoraSpec& spec, const EstimateInput& in,
                std::ostream& out) {
  const LoraSize s = lora_size(model, spec);
  const double compute = dtype_of_run == ComputeDtype::fp32 ? 4.0 : 2.0;
  const char* dtype = compute_dtype_name(dtype_of_run);
  std::string targets;
  for (const std::string& t : spec.target_names()) targets += (targets.empty() ? "" : ", ") + t;
  out << (spec.load_in_4bit ? "QLoRA" : "LoRA") << ": r=" << spec.r << " on " << targets << " of each of "
      << model.num_hidden_layers << " layers\n";
  char line[320];
  // PEFT's print_trainable_parameters line, which counts the adapters in "all params".
  std::snprintf(line, sizeof line, "trainable params: %s || all params: %s || trainable%%: %.4f\n",
                with_commas(s.trainable).c_str(), with_commas(s.trainable + s.frozen).c_str(),
                100 * s.trainable / (s.trainable + s.frozen));
  out << line << "frozen base params: " << with_commas(s.frozen);
  if (spec.load_in_4bit) {
    out << " (" << with_commas(s.frozen_nf4) << " of them in NF4: " << format_gb(s.nf4_bytes) << ")";
  }
  const int n = in.nodes * in.gpus_per_node;
  out << "\nModel states per GPU with " << (spec.load_in_4bit ? "QLoRA" : "LoRA")
      << ", no offload (A/B by DeepSpeed's formulas; frozen base in " << dtype
      << (spec.load_in_4bit ? " and NF4" : "") << ", whole at stages 0-2, 1/" << n
      << " at stage 3), beside full fine-tuning:\n";
  for (const LoraStateRow& r : estimate_lora_states(s, model_size(model), in.nodes, in.gpus_per_node, compute)) {
    std::snprintf(line, sizeof line,
                  "  stage %d: %9s = A/B %9s + frozen base %9s + gathered %9s | full fine-tuning %9s\n", r.stage,
                  format_gb(r.total()).c_str(), format_gb(r.trainable).c_str(), format_gb(r.frozen).c_str(),
                  format_gb(r.gathered).c_str(), format_gb(r.full).c_str());
    out << line;
  }
  out << "Bytes on the wire per optimizer step per GPU with " << (spec.load_in_4bit ? "QLoRA" : "LoRA") << " ("
      << dtype << (spec.load_in_4bit ? "; NF4 base matrices" : "") << "):\n";
  print_traffic(estimate_lora_traffic(s, in.nodes, in.gpus_per_node, compute, compute), out);
}

}  // namespace

namespace {

// estimate's own flags, and the rest (a recipe and its overrides).
struct EstimateFlags {
  EstimateInput in;
  std::string total, largest;  // --total_params / --largest_layer_params as given
  int micro_batch = 0, seq_len = 0;
  std::vector<std::string> rest;
};

bool is_estimate_flag(const std::string& arg) {
  for (const char* flag : {"--total_params", "--largest_layer_params", "--gpus_per_node", "--nodes", "--micro_batch",
                           "--seq_len"}) {
    const std::string f(flag);
    if (arg == f || arg.rfind(f + "=", 0) == 0) return true;
  }
  return false;
}

EstimateFlags split_estimate_flags(const std::vector<std::string>& args) {
  EstimateFlags f;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!is_estimate_flag(args[i])) {
      f.rest.push_back(args[i]);
      continue;
    }
    std::string key = args[i], value;
    const auto eq = key.find('=');
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
    if (key == "--total_params") f.total = value;
    else if (key == "--largest_layer_params") f.largest = value;
    else if (key == "--gpus_per_node") f.in.gpus_per_node = as_int(value);
    else if (key == "--nodes") f.in.nodes = as_int(value);
    else if (key == "--micro_batch") f.micro_batch = as_int(value);
    else if (key == "--seq_len") f.seq_len = as_int(value);
  }
  return f;
}

// DeepSpeed's three tables, then the bytes on the wire at the recipe's dtype.
void print_zero_estimates(const EstimateInput& in, bool bf16, int quantization_block, std::ostream& out) {
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
  const double wire = bf16 ? 2.0 : 4.0;
  out << "Bytes on the wire per optimizer step per GPU (" << (bf16 ? "bf16" : "fp32")
      << " weights and gradients; a group spanning nodes counts as inter-node):\n";
  print_traffic(estimate_traffic(in.total_params, in.nodes, in.gpus_per_node, wire, wire, quantization_block), out);
}

}  // namespace

int estimate(const std::vector<std::string>& args, std::ostream& out) {
  EstimateFlags f = split_estimate_flags(args);
  const TrainConfig cfg = load_recipe(parse_invocation(f.rest));
  const bool from_counts = !f.total.empty();
  if (from_counts != !f.largest.empty()) {
    throw ConfigError("--total_params and --largest_layer_params go together");
  }
  const LoraSpec lora = lora_spec(with_adapter_lora_keys(cfg));  // an adapter_path turns LoRA on, as in train
  if (lora.enabled && from_counts) {
    throw ConfigError("use_peft: the LoRA estimate counts the adapters on the recipe's model; give the model "
                      "(--config or model keys) instead of --total_params / --largest_layer_params");
  }
  EstimateInput& in = f.in;
  if (from_counts) {
    in.total_params = parse_count(f.total, "--total_params");
    in.largest_layer_params = parse_count(f.largest, "--largest_layer_params");
  } else {
    const ModelSize s = model_size(cfg.model);
    in.total_params = s.total;
    in.largest_layer_params = s.largest_layer;
  }
  print_zero_estimates(in, cfg.bf16, cfg.zero_quantization_block_size, out);
  if (!from_counts) {
    const int b = f.micro_batch > 0 ? f.micro_batch : cfg.per_device_train_batch_size;
    const int t = f.seq_len > 0 ? f.seq_len : cfg.max_seq_length;
    out << "Activations kept for backward per rank, micro-batch " << b << " x " << t
        << " tokens: " << format_gb(activation_bytes(cfg.model, b, t)) << "\n";
  }
  if (lora.enabled) print_lora(cfg.model, compute_dtype(cfg), lora, in, out);
  return 0;
}

}  // namespace shardft::cli
