#include "kernels/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/fp16.hpp"
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

namespace {

using Member = Kokkos::TeamPolicy<ExecSpace>::member_type;

// What the update does besides updating: nothing (a run's value is its decay flag), or the compute copy
// (a run's value is 2 * offset + decay flag, adamw_copy_runs) with cast_runs' element conversions.
struct NoCopy {
  KOKKOS_INLINE_FUNCTION static bool decays(std::int64_t value) { return value != 0; }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t, std::int64_t, float) const {}
};
struct CopyToBf16 {
  bf16* dst;
  KOKKOS_INLINE_FUNCTION static bool decays(std::int64_t value) { return (value & 1) != 0; }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t value, std::int64_t i, float p) const { dst[i + (value >> 1)] = bf16(p); }
};
struct CopyToF32 {
  float* dst;
  RunCast cast;
  KOKKOS_INLINE_FUNCTION static bool decays(std::int64_t value) { return (value & 1) != 0; }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t value, std::int64_t i, float p) const {
    dst[i + (value >> 1)] = cast == RunCast::round_bf16 ? round_to_bf16(p) : cast == RunCast::round_fp16 ? round_to_fp16(p) : p;
  }
};

void check_buffers(const FlatRuns& runs, Unmanaged1<float> param, Unmanaged1<const float> grad, Unmanaged1<float> m,
                   Unmanaged1<float> v) {
  const std::int64_t n = static_cast<std::int64_t>(param.extent(0));
  if (runs.span > n || static_cast<std::int64_t>(grad.extent(0)) < runs.span ||
      static_cast<std::int64_t>(m.extent(0)) < runs.span || static_cast<std::int64_t>(v.extent(0)) < runs.span) {
    throw std::invalid_argument("adamw_update_runs: the runs reach beyond the buffers");
  }
}

template <class Copy>
void update_runs(const char* name, const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                 Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                 Unmanaged1<const float> grad_scale, const Copy copy) {
  check_buffers(runs, param, grad, m, v);
  const AdamWCoefficients c = coefficients(h);
  float* p = param.data();
  const float* g = grad.data();
  float* mm = m.data();
  float* vv = v.data();
  const float* scale = grad_scale.extent(0) > 0 ? grad_scale.data() : nullptr;
  for_each_run_in_chunks(
      name, runs, KOKKOS_LAMBDA(const Member& team, const std::int64_t value, const std::int64_t a, const std::int64_t b) {
        const float decay = Copy::decays(value) ? c.decay : c.no_decay;
        if (scale) {
          const float s = *scale;  // read once: the stores below could alias it as far as the compiler knows
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, a, b), [&](const std::int64_t i) {
            adamw_element(c, decay, g[i] * s, p[i], mm[i], vv[i]);
            copy(value, i, p[i]);
          });
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, a, b), [&](const std::int64_t i) {
            adamw_element(c, decay, g[i], p[i], mm[i], vv[i]);
            copy(value, i, p[i]);
          });
        }
      });
}

}  // namespace

void adamw_update_runs(const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale) {
  update_runs("adamw_update_runs", h, runs, param, grad, m, v, grad_scale, NoCopy{});
}

void adamw_update_runs(const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale, const ComputeWeights& copy) {
  if ((copy.bf16_storage.extent(0) > 0) == (copy.f32_storage.extent(0) > 0)) {
    throw std::invalid_argument("adamw_update_runs: the compute weights need exactly one storage, bf16 or fp32");
  }
  if (copy.bf16_storage.extent(0) > 0) {
    update_runs("adamw_update_runs_copy_bf16", h, runs, param, grad, m, v, grad_scale, CopyToBf16{copy.bf16_storage.data()});
  } else {
    update_runs("adamw_update_runs_copy", h, runs, param, grad, m, v, grad_scale,
                CopyToF32{copy.f32_storage.data(), copy.cast});
  }
}

std::vector<FlatRun> adamw_copy_runs(const std::vector<FlatRun>& decay, const std::vector<FlatRun>& copy) {
  std::vector<FlatRun> out;
  std::size_t k = 0;
  for (const FlatRun& d : decay) {
    std::int64_t at = d.begin;
    const std::int64_t end = d.begin + d.length;
    while (at < end) {
      while (k < copy.size() && copy[k].begin + copy[k].length <= at) ++k;
      if (k == copy.size() || copy[k].begin > at) {
        throw std::invalid_argument("adamw_copy_runs: element " + std::to_string(at) + " is updated but has no compute copy");
      }
      if (copy[k].value < 0) throw std::invalid_argument("adamw_copy_runs: a negative compute-copy offset");
      const std::int64_t stop = std::min(end, copy[k].begin + copy[k].length);
      out.push_back({at, stop - at, 2 * copy[k].value + (d.value != 0 ? 1 : 0)});
      at = stop;
    }
  }
  return out;
}

}  // namespace shardft
