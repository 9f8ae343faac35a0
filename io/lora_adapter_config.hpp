#pragma once
// A PEFT LoRA adapter's configuration (`adapter_config.json`, as `peft.LoraConfig.save_pretrained` writes
// it) and the decoder modules LoRA may target. Only what shardft computes exactly as PEFT does is
// accepted: plain LoRA (no DoRA), bias "none", the same rank and alpha on every module, every layer,
// weights stored [out, in] (fan_in_fan_out false), no extra trained modules (modules_to_save).
#include <string>
#include <vector>

#include "io/safetensors.hpp"  // FormatError

namespace shardft {

// The linear modules of a Llama / Qwen2 / Mistral / Qwen3 decoder layer, in shardft's layer order.
// "all-linear" means all of them: PEFT's every nn.Linear except the output layer (lm_head).
const std::vector<std::string>& lora_linear_modules();  // q_proj k_proj v_proj o_proj gate_proj up_proj down_proj

// The modules a target specification names, deduplicated, in lora_linear_modules() order.
// spec: "all-linear", one module name, or names separated by commas ("q_proj,v_proj", for --key=value).
// An unknown or empty name throws FormatError starting with `where` (e.g. "recipe key lora_target_modules"
// or a file name and key) and listing the valid names.
std::vector<std::string> lora_target_modules(const std::string& spec, const std::string& where);
std::vector<std::string> lora_target_modules(const std::vector<std::string>& names, const std::string& where);

struct LoraAdapterConfig {
  int r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0.0;
  std::vector<std::string> target_modules;  // resolved names, lora_linear_modules() order
  bool use_rslora = false;
  std::string bias = "none";
  std::string base_model_name_or_path;
  std::string task_type = "CAUSAL_LM";
  std::string peft_type = "LORA";

  // The factor of B·A in y = W x + scale · B A x: alpha / r, or alpha / sqrt(r) with rsLoRA.
  double scale() const;
  bool targets(const std::string& module) const;  // module: a name of lora_linear_modules()
};

// adapter_config.json text with every key PEFT 0.13 writes (sorted, 2-space indent, as PEFT does);
// target_modules is written as the explicit list, as PEFT saves "all-linear" after resolving it.
std::string adapter_config_to_json(const LoraAdapterConfig& config);
// Parses adapter_config.json text. `where` (the file path) starts every error message. Throws
// FormatError naming the key and what is supported for: peft_type other than LORA, task_type other than
// CAUSAL_LM or null, use_dora true, bias other than "none", lora_bias true, fan_in_fan_out true,
// modules_to_save / layers_to_transform / layer_replication / target_parameters /
// trainable_token_indices set, rank_pattern / alpha_pattern non-empty, use_qalora true, a target module
// that is not a decoder linear, r not a positive integer, lora_alpha not a number, lora_dropout outside
// [0, 1). Other keys (init_lora_weights, inference_mode, revision, peft_version, ...) are accepted.
LoraAdapterConfig adapter_config_from_json(const std::string& text, const std::string& where);

// The file forms: written through path + ".tmp" renamed into place; read errors name the path.
void write_adapter_config_json(const std::string& path, const LoraAdapterConfig& config);
LoraAdapterConfig read_adapter_config_json(const std::string& path);

}  // namespace shardft
