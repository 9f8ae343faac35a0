#pragma once
// Small elementwise kernels over flat fp32 buffers.
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

// y[i] += x[i]   (residual add)
void add_inplace(Unmanaged1<float> y, Unmanaged1<const float> x);
// x[i] *= c
void scale_inplace(Unmanaged1<float> x, float c);
// out(0) = sum_i x[i]^2, accumulated in double, left on the device
void sum_squares(Unmanaged1<const float> x, Unmanaged1<double> out);
// The same read back to the host (a host sync)
double sum_squares(Unmanaged1<const float> x);
// Gradient clipping by a global norm held on the device (norm = sqrt(norm_sq(0))): when max_norm > 0 and
// norm > max_norm, g[i] *= max_norm / (norm + 1e-6), the factor computed in double and applied in fp32
// (torch.nn.utils.clip_grad_norm_). The host never sees the norm.
void clip_to_norm(Unmanaged1<float> g, Unmanaged1<const double> norm_sq, double max_norm);
// clip_to_norm in its two halves, for a caller that folds the multiply into a later pass over g (the
// optimizer step): factor(0) = the float clip_to_norm multiplies by (1 when it does not clip), computed
// on the device; then g[i] *= factor(0).
void clip_factor(Unmanaged1<const double> norm_sq, double max_norm, Unmanaged1<float> factor);
void apply_clip_factor(Unmanaged1<float> g, Unmanaged1<const float> factor);
// acc(0) += x(0), on the device
void add_scalar(Unmanaged1<double> acc, Unmanaged1<const double> x);
// x(0) on the host: a copy and a host sync, counted as `what` (kernels/device_traffic.hpp)
double read_scalar(Unmanaged1<const double> x, const char* what);
// dst[i] = bf16(src[i]) as fp32: what a bf16 copy of src holds
void round_to_bf16(Unmanaged1<const float> src, Unmanaged1<float> dst);
// dst[i] = bf16(src[i]): the bf16 copy itself, half the bytes (round to nearest even)
void to_bf16(Unmanaged1<const float> src, Unmanaged1<bf16> dst);
// kept[i] = bf16(x[i]) and x[i] = its value: the copy and the fp32 buffer then hold the same numbers
void round_and_copy_to_bf16(Unmanaged1<float> x, Unmanaged1<bf16> kept);
// dst[i] = src[i] widened to fp32 (exact)
void to_f32(Unmanaged1<const bf16> src, Unmanaged1<float> dst);
// The same two conversions on matrices whose rows need not be back to back (column blocks of a wider
// array, kernels/types.hpp Strided2); shapes must match.
void to_f32(Strided2<const bf16> src, Unmanaged2<float> dst);
void to_bf16(Unmanaged2<const float> src, Strided2<bf16> dst);
// true when every element is finite
bool all_finite(Unmanaged1<const float> x);

// Flat view of a 2-D buffer (contiguous, row-major).
template <class T>
Unmanaged1<T> flat(const Unmanaged2<T>& x) {
  return Unmanaged1<T>(x.data(), x.extent(0) * x.extent(1));
}

}  // namespace shardft
