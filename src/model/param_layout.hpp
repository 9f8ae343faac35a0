#pragma once
// Every parameter of the decoder, under its HF name and row-major shape, grouped into blocks.
// A block is the unit the sharding engine gathers and releases: block 0 is the embedding,
// blocks 1..L the decoder layers, block L+1 the final norm and LM head. With tied embeddings
// the head block uses the embedding weight too (it appears in both blocks' param lists).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "config/lora_config.hpp"
#include "config/model_config.hpp"

namespace shardft {

// What a parameter is: it decides its initialisation (matrix: normal, norm: 1, bias: 0, LoRA's A:
// PEFT's Kaiming-uniform, B: 0) and whether weight decay applies (HF Trainer's rule: matrices only,
// never norm weights or biases; LoRA's A and B are matrices).
enum class ParamKind { matrix, norm, bias, lora_a, lora_b };

struct ParamSpec {
  std::string name;               // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<std::int64_t> shape;  // [out, in] for matrices, [n] for norm weights and biases
  ParamKind kind = ParamKind::matrix;
  // No gradient, no optimizer state, never updated: every base weight when LoRA is on.
  bool frozen = false;
  // Held as NF4 4-bit blocks (QLoRA, LoraSpec::load_in_4bit): a frozen decoder-linear weight matrix.
  bool nf4 = false;
  std::int64_t numel() const;
  bool is_norm() const { return kind == ParamKind::norm; }
  bool is_bias() const { return kind == ParamKind::bias; }
  bool is_lora() const { return kind == ParamKind::lora_a || kind == ParamKind::lora_b; }
  bool takes_weight_decay() const { return kind == ParamKind::matrix || is_lora(); }
};

struct ParamBlock {
  std::string name;               // "embed", "layers.3", "head"
  std::vector<int> params;        // indices into ParamLayout::params()
};

// Indices of one decoder layer's parameters, in the order the layout stores them. The attention
// biases (HF "...q_proj.bias" etc., stored right after their weight) are -1 when the model has none:
// q/k/v with ModelConfig::qkv_bias (Qwen2), o with ModelConfig::o_bias. q_norm / k_norm (HF
// "...self_attn.q_norm.weight", [head_dim], stored right after q_proj's / k_proj's weight and bias) are -1
// without ModelConfig::qk_norm (Qwen3 has them).
// A LoRA term's parameters: A [r, in] and B [out, r] (HF/PEFT "...q_proj.lora_A.weight"); -1: none.
struct LoraParams {
  int a = -1, b = -1;
  bool on() const { return a >= 0; }
};

struct LayerParams {
  int input_layernorm = -1, q_proj = -1, q_bias = -1, q_norm = -1, k_proj = -1, k_bias = -1, k_norm = -1,
      v_proj = -1, v_bias = -1, o_proj = -1, o_bias = -1, post_attention_layernorm = -1, gate_proj = -1,
      up_proj = -1, down_proj = -1;
  std::array<LoraParams, kNumLoraModules> lora;  // indexed by LoraModule
  const LoraParams& lora_of(LoraModule m) const { return lora[static_cast<int>(m)]; }
};

class ParamLayout {
 public:
  // With LoRA, each layer block also holds the A and B of every targeted linear layer (after the layer's
  // base parameters, in LoraModule order), and every base parameter is frozen.
  explicit ParamLayout(const ModelConfig& cfg, const LoraSpec& lora = {});

  const std::vector<ParamSpec>& params() const { return params_; }
  const std::vector<ParamBlock>& blocks() const { return blocks_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const LayerParams& layer(int l) const { return layers_[l]; }
  int embed_tokens() const { return embed_; }
  int final_norm() const { return norm_; }
  int lm_head() const { return lm_head_; }  // == embed_tokens() when tied
  int head_block() const { return static_cast<int>(blocks_.size()) - 1; }

  int index(const std::string& name) const;  // throws std::out_of_range naming the parameter
  std::int64_t offset(int param) const { return offsets_[param]; }  // in a flat buffer of all params
  std::int64_t total_numel() const { return total_; }
  const LoraSpec& lora() const { return lora_; }
  bool has_frozen() const { return lora_.enabled; }

 private:
  int add(const std::string& name, std::vector<std::int64_t> shape, ParamKind kind);
  std::vector<ParamSpec> params_;
  std::vector<std::int64_t> offsets_;
  std::vector<ParamBlock> blocks_;
  std::vector<LayerParams> layers_;
  LoraSpec lora_;
  int embed_ = -1, norm_ = -1, lm_head_ = -1;
  std::int64_t total_ = 0;
};

}  // namespace shardft
