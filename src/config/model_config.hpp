#pragma once
// The decoder's shape, under the names HF config.json uses (LlamaConfig / Qwen2Config / Qwen3Config).
#include <cstdint>
#include <string>

#include "config/rope_scaling.hpp"

namespace shardft {

struct ModelConfig {
  int vocab_size = 272;
  int hidden_size = 128;
  int num_hidden_layers = 2;
  int num_attention_heads = 4;
  int num_key_value_heads = 2;
  int intermediate_size = 384;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // config.json's rope_scaling; plain RoPE by default
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = true;
  // Attention projection biases. Qwen2 (Qwen2ForCausalLM) carries biases on q/k/v only:
  // qkv_bias. HF LlamaConfig's attention_bias=true puts them on q/k/v AND o_proj: qkv_bias
  // and o_bias both set. o_bias alone is rejected (no HF architecture has it).
  bool qkv_bias = false;  // q_proj/k_proj/v_proj carry biases
  bool o_bias = false;    // o_proj carries a bias
  // Qwen3: an RMSNorm over each head of q and of k (q_norm, k_norm: [head_dim] weights, eps rms_norm_eps)
  // after the projections, before RoPE.
  bool qk_norm = false;
  int max_position_embeddings = 256;
  double initializer_range = 0.02;
  // config.json's head_dim, the width of one attention head: q_proj is [heads * head_dim, hidden], k_proj
  // and v_proj [kv_heads * head_dim, hidden], o_proj [hidden, heads * head_dim]. 0: absent, and then
  // hidden_size / num_attention_heads.
  int explicit_head_dim = 0;

  int head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads; }
};

}  // namespace shardft
