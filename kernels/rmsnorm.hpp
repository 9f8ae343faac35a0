#pragma once
// RMSNorm over the last dimension.
//   x [N,d], w [d]:  rstd[n] = 1 / sqrt(mean_j x[n,j]^2 + eps),   y[n,j] = w[j] * x[n,j] * rstd[n]
// Backward, with g[n,j] = dy[n,j] * w[j]:
//   dx[n,j] += rstd[n] * g[n,j] - rstd[n]^3 * x[n,j] * (1/d) * sum_k g[n,k] * x[n,k]
//   dw[j]   += sum_n dy[n,j] * x[n,j] * rstd[n]
#include <type_traits>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

// A norm's weight [d] as its source holds it: fp32, or a bf16 step's bf16 compute copy, which the kernels
// read widened in registers (the values of its fp32 widening, without a widened copy or a launch to make
// one). Made implicitly from either view.
struct NormWeight {
  Unmanaged1<const float> f32;
  Unmanaged1<const bf16> b16;
  bool is_bf16 = false;

  NormWeight() = default;
  template <class View, class = std::enable_if_t<Kokkos::is_view<View>::value>>
  NormWeight(const View& w) {  // NOLINT: implicit, as the views it stands for
    if constexpr (std::is_same_v<std::remove_const_t<typename View::value_type>, bf16>) {
      b16 = w;
      is_bf16 = true;
    } else {
      f32 = w;
    }
  }
  std::size_t size() const { return is_bf16 ? b16.extent(0) : f32.extent(0); }
  // f(view) with the view of the weight's type (kernels templated on it).
  template <class F>
  void visit(F&& f) const {
    if (is_bf16) {
      f(b16);
    } else {
      f(f32);
    }
  }
};

void rmsnorm_forward(Unmanaged2<const float> x, const NormWeight& w, float eps, Unmanaged2<float> y,
                     Unmanaged1<float> rstd);
// The same y written in bf16 (a bf16 GEMM's input): each element the fp32 y rounded once.
void rmsnorm_forward(Unmanaged2<const float> x, const NormWeight& w, float eps, Unmanaged2<bf16> y,
                     Unmanaged1<float> rstd);
// A bf16 step's residual stream (bf16, which the residual GEMMs write rounded) kept and normed in one
// pass: x is copied into x_kept where that is not empty (an empty one: the final norm, whose input backward
// reads from the stream itself), and y and rstd are what rmsnorm_forward gives on x's widening, bit for bit
// on the host, with one pass over x and one launch fewer than a copy and a norm.
void rmsnorm_forward_keeping(Unmanaged2<const bf16> x, Unmanaged2<bf16> x_kept, const NormWeight& w, float eps,
                             Unmanaged2<bf16> y, Unmanaged1<float> rstd);

// Adds into dx (the residual stream's gradient arrives there first) and into dw (overwrite_dw: writes
// dw, its old values unread: a gradient buffer not yet written in this sum); an empty dw (a frozen norm
// weight) is not computed. A non-empty dx_rounded receives the updated dx rounded to bf16 (what the
// next backward GEMMs of a bf16 step read) in the same pass.
void rmsnorm_backward(Unmanaged2<const float> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded = {}, bool overwrite_dw = false);
// The same with x in bf16 (a bf16 step's kept residual stream): what its fp32 widening gives.
void rmsnorm_backward(Unmanaged2<const bf16> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const float> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded = {}, bool overwrite_dw = false);
// The same with dy in bf16 (a bf16 step's norm-output gradient, which the dgrad GEMMs after the norm write
// rounded, as autocast's linear backward does): what its fp32 widening gives.
void rmsnorm_backward(Unmanaged2<const float> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const bf16> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded = {}, bool overwrite_dw = false);
void rmsnorm_backward(Unmanaged2<const bf16> x, const NormWeight& w, Unmanaged1<const float> rstd,
                      Unmanaged2<const bf16> dy, Unmanaged2<float> dx, Unmanaged1<float> dw,
                      Unmanaged2<bf16> dx_rounded = {}, bool overwrite_dw = false);

}  // namespace shardft
