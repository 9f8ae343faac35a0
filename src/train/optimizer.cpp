#include "train/optimizer.hpp"

#include <cmath>

#include "kernels/elementwise.hpp"

namespace shardft {

AdamW::AdamW(const ParamLayout& layout, const AdamWConfig& cfg)
    : layout_(layout), cfg_(cfg), m_("adam_exp_avg", layout.total_numel()), v_("adam_exp_avg_sq", layout.total_numel()) {}

void AdamW::step(View1<float> master, View1<const float> grads, double lr) {
  ++step_;
  AdamWHyper h;
  h.lr = static_cast<float>(lr);
  h.beta1 = static_cast<float>(cfg_.beta1);
  h.beta2 = static_cast<float>(cfg_.beta2);
  h.eps = static_cast<float>(cfg_.eps);
  h.step = step_;
  for (std::size_t p = 0; p < layout_.params().size(); ++p) {
    const std::int64_t off = layout_.offset(static_cast<int>(p)), n = layout_.params()[p].numel();
    h.weight_decay = layout_.params()[p].is_norm() ? 0.f : static_cast<float>(cfg_.weight_decay);
    adamw_update(h, Unmanaged1<float>(master.data() + off, n), Unmanaged1<const float>(grads.data() + off, n),
                 Unmanaged1<float>(m_.data() + off, n), Unmanaged1<float>(v_.data() + off, n));
  }
}

double clip_grad_norm(View1<float> grads, double max_norm) {
  const double norm = std::sqrt(sum_squares(grads));
  if (max_norm > 0 && norm > max_norm) scale_inplace(grads, static_cast<float>(max_norm / (norm + 1e-6)));
  return norm;
}

}  // namespace shardft
