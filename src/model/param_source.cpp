#include "model/param_source.hpp"

namespace shardft {

Unmanaged2<const float> weight_matrix(ParamSource& params, const ParamLayout& layout, int param) {
  const auto& shape = layout.params()[param].shape;
  return Unmanaged2<const float>(params.weight(param).data(), shape.at(0), shape.at(1));
}

Unmanaged2<const bf16> weight_matrix_bf16(ParamSource& params, const ParamLayout& layout, int param) {
  const Unmanaged1<const bf16> w = params.weight_bf16(param);
  if (w.extent(0) == 0) return {};
  const auto& shape = layout.params()[param].shape;
  return Unmanaged2<const bf16>(w.data(), shape.at(0), shape.at(1));
}

Unmanaged2<float> grad_matrix(GradSink& grads, const ParamLayout& layout, int param) {
  const Unmanaged1<float> g = grads.grad(param);
  if (g.extent(0) == 0) return {};  // frozen
  const auto& shape = layout.params()[param].shape;
  return Unmanaged2<float>(g.data(), shape.at(0), shape.at(1));
}

Unmanaged2<float> grad_matrix_to_write(GradSink& grads, const ParamLayout& layout, int param, bool* overwrite) {
  const GradWrite g = grads.grad_to_write(param);
  *overwrite = g.overwrite;
  if (g.values.extent(0) == 0) return {};  // frozen
  const auto& shape = layout.params()[param].shape;
  return Unmanaged2<float>(g.values.data(), shape.at(0), shape.at(1));
}

LocalParams::LocalParams(const ParamLayout& layout)
    : layout_(layout),
      weights_("local_weights", layout.total_numel()),
      grads_("local_grads", layout.total_numel()) {}

Unmanaged1<const float> LocalParams::weight(int param) {
  return Unmanaged1<const float>(weights_.data() + layout_.offset(param), layout_.params()[param].numel());
}

Unmanaged1<float> LocalParams::grad(int param) {
  if (layout_.params()[param].frozen) return {};
  return Unmanaged1<float>(grads_.data() + layout_.offset(param), layout_.params()[param].numel());
}

}  // namespace shardft
