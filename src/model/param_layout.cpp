#include "model/param_layout.hpp"

#include <stdexcept>

namespace shardft {

std::int64_t ParamSpec::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

int ParamLayout::add(const std::string& name, std::vector<std::int64_t> shape) {
  params_.push_back({name, std::move(shape)});
  offsets_.push_back(total_);
  total_ += params_.back().numel();
  return static_cast<int>(params_.size()) - 1;
}

ParamLayout::ParamLayout(const ModelConfig& c) {
  const std::int64_t d = c.hidden_size, hd = c.head_dim(), V = c.vocab_size, I = c.intermediate_size;
  const std::int64_t q_out = c.num_attention_heads * hd, kv_out = c.num_key_value_heads * hd;

  embed_ = add("model.embed_tokens.weight", {V, d});
  blocks_.push_back({"embed", {embed_}});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerParams lp{};
    lp.input_layernorm = add(p + "input_layernorm.weight", {d});
    lp.q_proj = add(p + "self_attn.q_proj.weight", {q_out, d});
    lp.k_proj = add(p + "self_attn.k_proj.weight", {kv_out, d});
    lp.v_proj = add(p + "self_attn.v_proj.weight", {kv_out, d});
    lp.o_proj = add(p + "self_attn.o_proj.weight", {d, q_out});
    lp.post_attention_layernorm = add(p + "post_attention_layernorm.weight", {d});
    lp.gate_proj = add(p + "mlp.gate_proj.weight", {I, d});
    lp.up_proj = add(p + "mlp.up_proj.weight", {I, d});
    lp.down_proj = add(p + "mlp.down_proj.weight", {d, I});
    layers_.push_back(lp);
    blocks_.push_back({"layers." + std::to_string(l),
                       {lp.input_layernorm, lp.q_proj, lp.k_proj, lp.v_proj, lp.o_proj, lp.post_attention_layernorm,
                        lp.gate_proj, lp.up_proj, lp.down_proj}});
  }
  norm_ = add("model.norm.weight", {d});
  lm_head_ = c.tie_word_embeddings ? embed_ : add("lm_head.weight", {V, d});
  blocks_.push_back({"head", {norm_, lm_head_}});
}

int ParamLayout::index(const std::string& name) const {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].name == name) return static_cast<int>(i);
  }
  throw std::out_of_range("no parameter named '" + name + "' in this model");
}

}  // namespace shardft
