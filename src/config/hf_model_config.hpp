#pragma once
// An HF model directory's config.json as a ModelConfig: LlamaForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM and MistralForCausalLM, the architectures whose math the decoder implements.
#include <string>

#include "config/model_config.hpp"

namespace shardft {

struct HfModelConfig {
  ModelConfig model;
  std::string model_type;   // "llama" | "qwen2" | "qwen3" | "mistral"
  int sliding_window = 0;   // Mistral / Qwen2 sliding-window attention span; 0: none
  // A bitsandbytes 4-bit save (quantization_config: quant_method bitsandbytes, load_in_4bit, nf4, double
  // quant): its decoder linears are NF4 bytes (io/bnb4_weights.hpp), read as they are by a QLoRA run.
  bool bnb_4bit = false;
  std::string bnb_4bit_compute_dtype;  // as saved ("" when absent)
};

// Reads dir/config.json. Throws ConfigError naming the file and the key for an architecture, an
// activation or a feature the decoder does not have (a rope_scaling type other than linear, dynamic, yarn
// or llama3, partial_rotary_factor, mlp_bias, an odd head_dim, ...), a missing required key or a value of
// the wrong type. Of quantized checkpoints only bitsandbytes' 4-bit NF4 with double quantization and
// uint8 storage is read; any other quantization_config is an error naming the key.
HfModelConfig read_hf_model_config(const std::string& dir);

}  // namespace shardft
