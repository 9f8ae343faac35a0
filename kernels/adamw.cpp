#include "kernels/adamw.hpp"

#include <cmath>

#include "kernels/math.hpp"

namespace shardft {

void adamw_update(const AdamWHyper& h, Unmanaged1<float> param, Unmanaged1<const float> grad, Unmanaged1<float> m,
                  Unmanaged1<float> v) {
  const float b1 = h.beta1, b2 = h.beta2, eps = h.eps;
  const float decay = 1.f - h.lr * h.weight_decay;
  const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), h.step)));
  const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), h.step)));
  Kokkos::parallel_for(
      "adamw_update", Range(0, param.extent(0)), KOKKOS_LAMBDA(const std::int64_t i) {
        const float g = grad(i);
        const float mi = b1 * m(i) + (1.f - b1) * g;
        const float vi = b2 * v(i) + (1.f - b2) * g * g;
        m(i) = mi;
        v(i) = vi;
        param(i) = param(i) * decay - step_size * mi / (kmath::sqrt(vi) * inv_sqrt_bc2 + eps);
      });
}

}  // namespace shardft
