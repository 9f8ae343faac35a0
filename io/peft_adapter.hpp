#pragma once
// A PEFT LoRA adapter directory as `PeftModel.save_pretrained` writes it and
// `PeftModel.from_pretrained` loads it: adapter_config.json + adapter_model.safetensors, whose tensors are
//   base_model.model.<HF module path>.lora_A.weight   A [r, in_features]
//   base_model.model.<HF module path>.lora_B.weight   B [out_features, r]
// for each adapted linear `<HF module path>` (e.g. model.layers.3.self_attn.q_proj), whose weight
// `<HF module path>.weight` [out_features, in_features] is also shardft's parameter name.
// The adapted layer computes y = W x + scale · B (A x) (scale: LoraAdapterConfig::scale()).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/lora_adapter_config.hpp"
#include "io/safetensors.hpp"

namespace shardft {

enum class LoraFactor { A, B };

// "model.layers.<layer>.self_attn.q_proj.weight" (q/k/v/o_proj) or "model.layers.<layer>.mlp.up_proj.weight"
// (gate/up/down_proj). Throws FormatError when module is not one of lora_linear_modules() or layer < 0.
std::string lora_base_weight_name(int layer, const std::string& module);

// The base weight name -> PEFT's tensor name, e.g. "model.layers.3.self_attn.q_proj.weight", A ->
// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight". Throws FormatError when the name is
// not a decoder linear's weight (as lora_base_weight_name spells it).
std::string peft_lora_tensor_name(const std::string& base_weight_name, LoraFactor factor);

struct PeftLoraTensorName {
  std::string base_weight;  // "model.layers.3.self_attn.q_proj.weight"
  LoraFactor factor = LoraFactor::A;
  int layer = 0;
  std::string module;  // "q_proj"
};
// PEFT's tensor name -> what it adapts. Throws FormatError starting with `where` (the file) and naming the
// tensor when it is not "base_model.model.model.layers.<N>.<self_attn|mlp>.<module>.lora_<A|B>.weight"
// with a decoder linear module (lm_head, embeddings, DoRA magnitudes, in-memory ".default." names, ...).
PeftLoraTensorName parse_peft_lora_tensor_name(const std::string& peft_name, const std::string& where);

struct LoraFactors {
  TensorF32 A;  // [r, in_features]
  TensorF32 B;  // [out_features, r]
};
using LoraTensors = std::map<std::string, LoraFactors>;  // key: the adapted base weight name

struct PeftAdapter {
  LoraAdapterConfig config;
  LoraTensors tensors;
};

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";

// Creates dir if needed and writes adapter_config.json and adapter_model.safetensors (fp32), each through
// a ".tmp" file renamed into place. The tensors are checked as read_peft_adapter checks them (FormatError
// naming dir and the tensor) before anything is written.
void write_peft_adapter(const std::string& dir, const LoraAdapterConfig& config, const LoraTensors& tensors);

// Reads and checks a PEFT adapter directory: the config (see adapter_config_from_json), then every tensor
// of adapter_model.safetensors (F32, or BF16 / F16 widened to fp32) must be a lora_A / lora_B of a module
// the config targets, every A has its B and every B its A, A is [r, in] and B [out, r] with the config's
// r. Errors are FormatError naming the file and the tensor.
PeftAdapter read_peft_adapter(const std::string& dir);

// Checks an adapter against the base model it is applied to: every adapted weight exists there with
// shape [out, in] = [B rows, A columns], and every decoder linear weight of a targeted module has its
// factors (an adapter covers all layers, as PEFT's does). base_weight_shapes: parameter name -> shape
// (other parameters are ignored). Errors start with `where` and name the weight.
void check_peft_adapter_matches(const PeftAdapter& adapter,
                                const std::map<std::string, std::vector<std::int64_t>>& base_weight_shapes,
                                const std::string& where);

// W [out, in] += scale · B [out, r] · A [r, in]: each element's r products and W are summed in double and
// rounded to fp32 once (merging the adapter for consolidate --merge_adapters and generation).
void merge_lora_into(float* W, std::int64_t out, std::int64_t in, const float* A, const float* B, std::int64_t r,
                     double scale);
// The same on host tensors; throws FormatError when the shapes do not chain ([out, in], [r, in], [out, r]).
void merge_lora_into(TensorF32& W, const LoraFactors& factors, double scale);

}  // namespace shardft
