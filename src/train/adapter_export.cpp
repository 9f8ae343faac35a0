#include "train/adapter_export.hpp"

#include <map>

namespace shardft {
namespace {

// "<module path>.lora_A.weight" -> "<module path>.weight".
std::string base_weight_of(const ParamSpec& p) {
  const std::size_t tail = std::string(".lora_A.weight").size();  // lora_B's has the same length
  return p.name.substr(0, p.name.size() - tail) + ".weight";
}

TensorF32 tensor_of(const ParamLayout& layout, int param, const std::vector<float>& values) {
  const ParamSpec& p = layout.params()[param];
  const auto first = values.begin() + layout.offset(param);
  return TensorF32{p.shape, std::vector<float>(first, first + p.numel())};
}

}  // namespace

LoraAdapterConfig adapter_config_of(const LoraSpec& spec, const std::string& base) {
  LoraAdapterConfig c;
  c.r = spec.r;
  c.lora_alpha = spec.alpha;
  c.lora_dropout = spec.dropout;
  c.use_rslora = spec.use_rslora;
  c.target_modules = spec.target_names();
  c.base_model_name_or_path = base;
  return c;
}

LoraTensors lora_tensors_of(const ParamLayout& layout, const std::vector<float>& values) {
  LoraTensors out;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!spec.is_lora()) continue;
    LoraFactors& f = out[base_weight_of(spec)];
    (spec.kind == ParamKind::lora_a ? f.A : f.B) = tensor_of(layout, static_cast<int>(p), values);
  }
  return out;
}

void merge_lora_terms(const ParamLayout& layout, std::vector<float>& values) {
  std::map<std::string, int> by_name;
  for (std::size_t p = 0; p < layout.params().size(); ++p) by_name[layout.params()[p].name] = static_cast<int>(p);
  const double scale = layout.lora().scale();
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& a = layout.params()[p];
    if (a.kind != ParamKind::lora_a) continue;
    const std::string stem = a.name.substr(0, a.name.size() - std::string("lora_A.weight").size());
    const int b = by_name.at(stem + "lora_B.weight"), w = by_name.at(base_weight_of(a));
    const ParamSpec& ws = layout.params()[w];
    merge_lora_into(values.data() + layout.offset(w), ws.shape[0], ws.shape[1], values.data() + layout.offset(static_cast<int>(p)),
                    values.data() + layout.offset(b), a.shape[0], scale);
  }
}

}  // namespace shardft
