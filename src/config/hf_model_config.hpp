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
};

// Reads dir/config.json. Throws ConfigError naming the file and the key for an architecture, an
// activation or a feature the decoder does not have (a rope_scaling type other than linear, dynamic, yarn
// or llama3, partial_rotary_factor, mlp_bias, an odd head_dim, ...), a missing required key or a value of
// the wrong type.
HfModelConfig read_hf_model_config(const std::string& dir);

}  // namespace shardft
