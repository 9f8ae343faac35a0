#include "model/param_source.hpp"

namespace shardft {

LocalParams::LocalParams(const ParamLayout& layout)
    : layout_(layout),
      weights_("local_weights", layout.total_numel()),
      grads_("local_grads", layout.total_numel()) {}

Unmanaged1<const float> LocalParams::weight(int param) {
  return Unmanaged1<const float>(weights_.data() + layout_.offset(param), layout_.params()[param].numel());
}

Unmanaged1<float> LocalParams::grad(int param) {
  return Unmanaged1<float>(grads_.data() + layout_.offset(param), layout_.params()[param].numel());
}

}  // namespace shardft
