#include "kernels/adamw.hpp"

#include <cmath>
#include <stdexcept>

#include "kernels/math.hpp"

namespace shardft {

namespace {

// The step's scalars, rounded to float once on the host as every launch has always rounded them.
struct AdamWCoefficients {
  float b1, b2, eps, step_size, inv_sqrt_bc2;
  float decay;     // 1 - lr * wd
  float no_decay;  // 1 - lr * 0: exactly 1, computed the same way so both paths round alike
};

AdamWCoefficients coefficients(const AdamWHyper& h) {
  return {h.beta1,
          h.beta2,
          h.eps,
          static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), h.step))),
          static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), h.step))),
          1.f - h.lr * h.weight_decay,
          1.f - h.lr * 0.f};
}

// One element's update: the one expression both kernels compile, so they round alike.
KOKKOS_INLINE_FUNCTION void adamw_element(const AdamWCoefficients& c, float decay, float g, float& p, float& m,
                                          float& v) {
  const float mi = c.b1 * m + (1.f - c.b1) * g;
  const float vi = c.b2 * v + (1.f - c.b2) * g * g;
  m = mi;
  v = vi;
  p = p * decay - c.step_size * mi / (kmath::sqrt(vi) * c.inv_sqrt_bc2 + c.eps);
}

}  // namespace

void adamw_update(const AdamWHyper& h, Unmanaged1<float> param, Unmanaged1<const float> grad, Unmanaged1<float> m,
                  Unmanaged1<float> v) {
  const AdamWCoefficients c = coefficients(h);
  Kokkos::parallel_for(
      "adamw_update", Range(0, param.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t i) { adamw_element(c, c.decay, grad(i), param(i), m(i), v(i)); });
}

void adamw_update_runs(const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale) {
  const std::int64_t n = static_cast<std::int64_t>(param.extent(0));
  if (runs.span > n || static_cast<std::int64_t>(grad.extent(0)) < runs.span ||
      static_cast<std::int64_t>(m.extent(0)) < runs.span || static_cast<std::int64_t>(v.extent(0)) < runs.span) {
    throw std::invalid_argument("adamw_update_runs: the runs reach beyond the buffers");
  }
  const AdamWCoefficients c = coefficients(h);
  float* p = param.data();
  const float* g = grad.data();
  float* mm = m.data();
  float* vv = v.data();
  const float* scale = grad_scale.extent(0) > 0 ? grad_scale.data() : nullptr;
  using Member = Kokkos::TeamPolicy<ExecSpace>::member_type;
  for_each_run_in_chunks(
      "adamw_update_runs", runs,
      KOKKOS_LAMBDA(const Member& team, const std::int64_t decays, const std::int64_t a, const std::int64_t b) {
        const float decay = decays ? c.decay : c.no_decay;
        if (scale) {
          const float s = *scale;  // read once: the stores below could alias it as far as the compiler knows
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, a, b), [&](const std::int64_t i) {
            adamw_element(c, decay, g[i] * s, p[i], mm[i], vv[i]);
          });
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, a, b),
                               [&](const std::int64_t i) { adamw_element(c, decay, g[i], p[i], mm[i], vv[i]); });
        }
      });
}

}  // namespace shardft
