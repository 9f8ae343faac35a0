#include "model/param_layout.hpp"

#include <stdexcept>

namespace shardft {

std::int64_t ParamSpec::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

int ParamLayout::add(const std::string& name, std::vector<std::int64_t> shape, ParamKind kind) {
  params_.push_back({name, std::move(shape), kind});
  offsets_.push_back(total_);
  total_ += params_.back().numel();
  return static_cast<int>(params_.size()) - 1;
}

ParamLayout::ParamLayout(const ModelConfig& c, const LoraSpec& lora) : lora_(lora) {
  const std::int64_t d = c.hidden_size, hd = c.head_dim(), V = c.vocab_size, I = c.intermediate_size;
  const std::int64_t q_out = c.num_attention_heads * hd, kv_out = c.num_key_value_heads * hd;

  using K = ParamKind;
  embed_ = add("model.embed_tokens.weight", {V, d}, K::matrix);
  blocks_.push_back({"embed", {embed_}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerParams lp;
    std::vector<int> block;
    auto param = [&](const std::string& name, std::vector<std::int64_t> shape, K kind) {
      block.push_back(add(p + name, std::move(shape), kind));
      return block.back();
    };
    lp.input_layernorm = param("input_layernorm.weight", {d}, K::norm);
    lp.q_proj = param("self_attn.q_proj.weight", {q_out, d}, K::matrix);
    if (c.qkv_bias) lp.q_bias = param("self_attn.q_proj.bias", {q_out}, K::bias);
    if (c.qk_norm) lp.q_norm = param("self_attn.q_norm.weight", {hd}, K::norm);
    lp.k_proj = param("self_attn.k_proj.weight", {kv_out, d}, K::matrix);
    if (c.qkv_bias) lp.k_bias = param("self_attn.k_proj.bias", {kv_out}, K::bias);
    if (c.qk_norm) lp.k_norm = param("self_attn.k_norm.weight", {hd}, K::norm);
    lp.v_proj = param("self_attn.v_proj.weight", {kv_out, d}, K::matrix);
    if (c.qkv_bias) lp.v_bias = param("self_attn.v_proj.bias", {kv_out}, K::bias);
    lp.o_proj = param("self_attn.o_proj.weight", {d, q_out}, K::matrix);
    if (c.o_bias) lp.o_bias = param("self_attn.o_proj.bias", {d}, K::bias);
    lp.post_attention_layernorm = param("post_attention_layernorm.weight", {d}, K::norm);
    lp.gate_proj = param("mlp.gate_proj.weight", {I, d}, K::matrix);
    lp.up_proj = param("mlp.up_proj.weight", {I, d}, K::matrix);
    lp.down_proj = param("mlp.down_proj.weight", {d, I}, K::matrix);
    if (lora.enabled) {
      const int base[kNumLoraModules] = {lp.q_proj, lp.k_proj, lp.v_proj, lp.o_proj, lp.gate_proj, lp.up_proj,
                                         lp.down_proj};
      for (int m = 0; m < kNumLoraModules; ++m) {
        if (!lora.targets[m]) continue;
        const std::vector<std::int64_t> shape = params_[base[m]].shape;  // [out, in]
        const std::string module = params_[base[m]].name.substr(p.size());
        const std::string stem = module.substr(0, module.size() - std::string("weight").size());
        lp.lora[m].a = param(stem + "lora_A.weight", {lora.r, shape[1]}, K::lora_a);
        lp.lora[m].b = param(stem + "lora_B.weight", {shape[0], lora.r}, K::lora_b);
      }
    }
    layers_.push_back(lp);
    blocks_.push_back({"layers." + std::to_string(l), std::move(block)});
  }
  norm_ = add("model.norm.weight", {d}, K::norm);
  lm_head_ = c.tie_word_embeddings ? embed_ : add("lm_head.weight", {V, d}, K::matrix);
  blocks_.push_back({"head", {norm_, lm_head_}});
  if (lora.enabled) {
    for (ParamSpec& p : params_) p.frozen = !p.is_lora();
  }
  if (lora.enabled && lora.load_in_4bit) {
    for (const LayerParams& lp : layers_) {
      for (int p : {lp.q_proj, lp.k_proj, lp.v_proj, lp.o_proj, lp.gate_proj, lp.up_proj, lp.down_proj}) params_[p].nf4 = true;
    }
  }
}

int ParamLayout::index(const std::string& name) const {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name == name) return static_cast<int>(i);
  }
  throw std::out_of_range("no parameter named '" + name + "' in this model");
}

}  // namespace shardft
