#include "infer/adapter_export.hpp"

#include <cstdint>

namespace shardft {
namespace {

// "<module path>.lora_A.weight" -> "<module path>.weight".
std::string base_weight_of(const ParamSpec& p) {
  const std::size_t tail = std::string(".lora_A.weight").size();  // lora_B's has the same length
  return p.name.substr(0, p.name.size() - tail) + ".weight";
}

// Layout elements [begin, begin + size) at `data`: a whole-model vector or a block's window.
template <class T>
struct LayoutSpan {
  std::int64_t begin;
  T* data;
  std::int64_t size;
  bool holds(const ParamLayout& layout, int param) const {
    const std::int64_t at = layout.offset(param) - begin;
    return at >= 0 && at + layout.params()[param].numel() <= size;
  }
  T* at(const ParamLayout& layout, int param) const { return data + (layout.offset(param) - begin); }
};

void add_lora_tensors_in(const ParamLayout& layout, const LayoutSpan<const float>& span, LoraTensors& out) {
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!spec.is_lora() || !span.holds(layout, static_cast<int>(p))) continue;
    const float* first = span.at(layout, static_cast<int>(p));
    LoraFactors& f = out[base_weight_of(spec)];
    (spec.kind == ParamKind::lora_a ? f.A : f.B) = TensorF32{spec.shape, std::vector<float>(first, first + spec.numel())};
  }
}

void merge_lora_terms_in(const ParamLayout& layout, const LayoutSpan<float>& span) {
  const double scale = layout.lora().scale();
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& a = layout.params()[p];
    if (a.kind != ParamKind::lora_a || !span.holds(layout, static_cast<int>(p))) continue;
    const std::string stem = a.name.substr(0, a.name.size() - std::string("lora_A.weight").size());
    const int b = layout.index(stem + "lora_B.weight"), w = layout.index(base_weight_of(a));
    const ParamSpec& ws = layout.params()[w];
    merge_lora_into(span.at(layout, w), ws.shape[0], ws.shape[1], span.at(layout, static_cast<int>(p)),
                    span.at(layout, b), a.shape[0], scale);
  }
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
  add_lora_tensors_in(layout, LayoutSpan<const float>{0, values.data(), static_cast<std::int64_t>(values.size())}, out);
  return out;
}

void add_lora_tensors(const ParamLayout& layout, const LayoutWindow& window, LoraTensors& out) {
  add_lora_tensors_in(
      layout, LayoutSpan<const float>{window.begin, window.values.data(), static_cast<std::int64_t>(window.values.size())},
      out);
}

void merge_lora_terms(const ParamLayout& layout, std::vector<float>& values) {
  merge_lora_terms_in(layout, LayoutSpan<float>{0, values.data(), static_cast<std::int64_t>(values.size())});
}

void merge_lora_terms(const ParamLayout& layout, LayoutWindow& window) {
  merge_lora_terms_in(layout, LayoutSpan<float>{window.begin, window.values.data(),
                                                static_cast<std::int64_t>(window.values.size())});
}

}  // namespace shardft
