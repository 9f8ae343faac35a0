#include "kernels/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/bf16_pack.hpp"
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

using Member = TeamLaunch::member_type;

// What the update does besides updating: nothing (a run's value is its decay flag), or the compute copy
// (a run's value is 2 * offset + decay flag, adamw_copy_runs) with cast_runs' element conversions.
// groups(value): whether a group of four elements starting at a multiple of four has a destination
// that is one aligned access too (the copy's offset a multiple of four); group() writes it.
struct NoCopy {
  KOKKOS_INLINE_FUNCTION static bool decays(std::int64_t value) { return value != 0; }
  // The host loop's copy of one element into its destination row `to` (none here).
  KOKKOS_INLINE_FUNCTION void* row(std::int64_t, std::int64_t) const { return nullptr; }
  KOKKOS_INLINE_FUNCTION static void put(void*, std::int64_t, float) {}
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t, std::int64_t, float) const {}
  bool aligned() const { return true; }
  KOKKOS_INLINE_FUNCTION bool groups(std::int64_t) const { return true; }
  KOKKOS_INLINE_FUNCTION void group(std::int64_t, std::int64_t, const float*) const {}
};
struct CopyToBf16 {
  bf16* dst;
  KOKKOS_INLINE_FUNCTION static bool decays(std::int64_t value) { return (value & 1) != 0; }
  KOKKOS_INLINE_FUNCTION bf16* row(std::int64_t value, std::int64_t a) const { return dst + a + (value >> 1); }
  KOKKOS_INLINE_FUNCTION static void put(bf16* __restrict__ to, std::int64_t i, float p) { to[i] = bf16(p); }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t value, std::int64_t i, float p) const { dst[i + (value >> 1)] = bf16(p); }
  bool aligned() const { return packs_fit<4>(4, {{dst, 2}}); }
  KOKKOS_INLINE_FUNCTION bool groups(std::int64_t value) const { return ((value >> 1) & 3) == 0; }
  KOKKOS_INLINE_FUNCTION void group(std::int64_t value, std::int64_t i, const float* p) const {
    Bf16Pack<4> out;
    for (int e = 0; e < 4; ++e) out.set(e, p[e]);
    store_pack<4>(dst + i + (value >> 1), out);
  }
};
struct CopyToF32 {
  float* dst;
  RunCast cast;
  KOKKOS_INLINE_FUNCTION static bool decays(std::int64_t value) { return (value & 1) != 0; }
  KOKKOS_INLINE_FUNCTION float cast_of(float p) const {
    return cast == RunCast::round_bf16 ? round_to_bf16(p) : cast == RunCast::round_fp16 ? round_to_fp16(p) : p;
  }
  KOKKOS_INLINE_FUNCTION float* row(std::int64_t value, std::int64_t a) const { return dst + a + (value >> 1); }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t value, std::int64_t i, float p) const { dst[i + (value >> 1)] = cast_of(p); }
  bool aligned() const { return packs_fit<4>(4, {{dst, 4}}); }
  KOKKOS_INLINE_FUNCTION bool groups(std::int64_t value) const { return ((value >> 1) & 3) == 0; }
  KOKKOS_INLINE_FUNCTION void group(std::int64_t value, std::int64_t i, const float* p) const {
    F32Pack<4> out;
    for (int e = 0; e < 4; ++e) out.v[e] = cast_of(p[e]);
    store_f32_pack<4>(dst + i + (value >> 1), out);
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

// A piece [a, b) of a run, its elements in groups of four where the buffers allow: p, g, m and v start
// 16-byte aligned (checked on the host), so element a4 = a rounded up to a multiple of four starts a
// group in each; the copy takes a group when Copy::groups says its destination does too. A group is
// one 16-byte access per buffer on a GPU instead of four; each element's arithmetic is the
// scalar path's (nvcc may contract it into FMAs differently in either, as it may in adamw_update).
template <class Copy>
struct RunPiece {
  AdamWCoefficients c;
  float* p;
  const float* g;
  float* mm;
  float* vv;
  Copy copy;
  bool grouped;  // the four buffers 16-byte aligned

  KOKKOS_INLINE_FUNCTION void element(std::int64_t value, float decay, float s, std::int64_t i) const {
    adamw_element(c, decay, g[i] * s, p[i], mm[i], vv[i]);
    copy(value, i, p[i]);
  }
  KOKKOS_INLINE_FUNCTION void group(std::int64_t value, float decay, float s, std::int64_t i) const {
    F32Pack<4> pp = load_f32_pack<4>(p + i), m4 = load_f32_pack<4>(mm + i), v4 = load_f32_pack<4>(vv + i);
    const F32Pack<4> g4 = load_f32_pack<4>(g + i);
    for (int e = 0; e < 4; ++e) adamw_element(c, decay, g4.v[e] * s, pp.v[e], m4.v[e], v4.v[e]);
    store_f32_pack<4>(p + i, pp);
    store_f32_pack<4>(mm + i, m4);
    store_f32_pack<4>(vv + i, v4);
    copy.group(value, i, pp.v);
  }
  // On the host: a plain loop over the piece through restrict-qualified pointers, which the compiler
  // vectorises (the element calls below, on five buffers that could alias, stay scalar there); each
  // element's arithmetic is the same adamw_element.
  template <class To, class Put>
  void host_loop(float decay, float s, std::int64_t a, std::int64_t b, To to, Put put) const {
    float* __restrict__ pp = p + a;
    const float* __restrict__ gg = g + a;
    float* __restrict__ m = mm + a;
    float* __restrict__ v = vv + a;
    const AdamWCoefficients k = c;
    for (std::int64_t i = 0; i < b - a; ++i) {
      adamw_element(k, decay, gg[i] * s, pp[i], m[i], v[i]);
      put(to, i, pp[i]);
    }
  }
  void on_host(std::int64_t value, float decay, float s, std::int64_t a, std::int64_t b) const {
    if constexpr (std::is_same_v<Copy, CopyToF32>) {
      float* to = copy.row(value, a);
      switch (copy.cast) {  // one loop per cast, so that none of them branches per element
        case RunCast::round_bf16:
          return host_loop(decay, s, a, b, to, [](float* __restrict__ t, std::int64_t i, float x) { t[i] = round_to_bf16(x); });
        case RunCast::round_fp16:
          return host_loop(decay, s, a, b, to, [](float* __restrict__ t, std::int64_t i, float x) { t[i] = round_to_fp16(x); });
        default:
          return host_loop(decay, s, a, b, to, [](float* __restrict__ t, std::int64_t i, float x) { t[i] = x; });
      }
    } else {
      host_loop(decay, s, a, b, copy.row(value, a), Copy::put);
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team, std::int64_t value, std::int64_t a, std::int64_t b,
                                         float s) const {
    const float decay = Copy::decays(value) ? c.decay : c.no_decay;
    if constexpr (!kComputeOnDevice) {
      on_host(value, decay, s, a, b);
      return;
    }
    std::int64_t a4 = (a + 3) / 4 * 4;
    if (!grouped || !copy.groups(value) || a4 >= b) a4 = b;
    const std::int64_t groups = (b - a4) / 4, tail = a4 + 4 * groups;
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, a, a4), [&](const std::int64_t i) { element(value, decay, s, i); });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, std::int64_t{0}, groups),
                         [&](const std::int64_t k) { group(value, decay, s, a4 + 4 * k); });
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, tail, b), [&](const std::int64_t i) { element(value, decay, s, i); });
  }
};

template <class Copy>
void update_runs(const ExecSpace& space, const char* name, const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                 Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                 Unmanaged1<const float> grad_scale, const Copy copy) {
  check_buffers(runs, param, grad, m, v);
  // Groups on a GPU only: on the host the compiler vectorises the scalar loop itself, and a vectorised
  // group could contract multiplies and adds into FMAs where adamw_update does not (the host's results
  // stay bit for bit those of adamw_update).
  constexpr bool device = !Kokkos::SpaceAccessibility<HostSpace, MemSpace>::accessible;
  const RunPiece<Copy> piece{coefficients(h), param.data(), grad.data(), m.data(), v.data(), copy,
                             device && copy.aligned() &&
                                 packs_fit<4>(4, {{param.data(), 4}, {grad.data(), 4}, {m.data(), 4}, {v.data(), 4}})};
  const float* scale = grad_scale.extent(0) > 0 ? grad_scale.data() : nullptr;
  for_each_run_in_chunks(
      space, name, runs, KOKKOS_LAMBDA(const Member& team, const std::int64_t value, const std::int64_t a, const std::int64_t b) {
        // The clip factor read once (the stores could alias it as far as the compiler knows); without
        // one, g * 1 is exact, so the unclipped update is unchanged.
        piece(team, value, a, b, scale ? *scale : 1.f);
      });
}

}  // namespace

void adamw_update_runs(const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale) {
  adamw_update_runs(ExecSpace(), h, runs, param, grad, m, v, grad_scale);
}

void adamw_update_runs(const ExecSpace& space, const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale) {
  update_runs(space, "adamw_update_runs", h, runs, param, grad, m, v, grad_scale, NoCopy{});
}

void adamw_update_runs(const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale, const ComputeWeights& copy) {
  adamw_update_runs(ExecSpace(), h, runs, param, grad, m, v, grad_scale, copy);
}

void adamw_update_runs(const ExecSpace& space, const AdamWHyper& h, const FlatRuns& runs, Unmanaged1<float> param,
                       Unmanaged1<const float> grad, Unmanaged1<float> m, Unmanaged1<float> v,
                       Unmanaged1<const float> grad_scale, const ComputeWeights& copy) {
  if ((copy.bf16_storage.extent(0) > 0) == (copy.f32_storage.extent(0) > 0)) {
    throw std::invalid_argument("adamw_update_runs: the compute weights need exactly one storage, bf16 or fp32");
  }
  if (copy.bf16_storage.extent(0) > 0) {
    update_runs(space, "adamw_update_runs_copy_bf16", h, runs, param, grad, m, v, grad_scale,
                CopyToBf16{copy.bf16_storage.data()});
  } else {
    update_runs(space, "adamw_update_runs_copy", h, runs, param, grad, m, v, grad_scale,
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
