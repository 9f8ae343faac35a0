#pragma once
// Small elementwise kernels over flat fp32 buffers.
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

// y[i] += x[i]   (residual add)
void add_inplace(Unmanaged1<float> y, Unmanaged1<const float> x);
// x[i] *= c
void scale_inplace(Unmanaged1<float> x, float c);
// sum_i x[i]^2, accumulated in double
double sum_squares(Unmanaged1<const float> x);
// dst[i] = bf16(src[i]) as fp32: what a bf16 copy of src holds
void round_to_bf16(Unmanaged1<const float> src, Unmanaged1<float> dst);
// dst[i] = bf16(src[i]): the bf16 copy itself, half the bytes (round to nearest even)
void to_bf16(Unmanaged1<const float> src, Unmanaged1<bf16> dst);
// kept[i] = bf16(x[i]) and x[i] = its value: the copy and the fp32 buffer then hold the same numbers
void round_and_copy_to_bf16(Unmanaged1<float> x, Unmanaged1<bf16> kept);
// dst[i] = src[i] widened to fp32 (exact)
void to_f32(Unmanaged1<const bf16> src, Unmanaged1<float> dst);
// true when every element is finite
bool all_finite(Unmanaged1<const float> x);

// Flat view of a 2-D buffer (contiguous, row-major).
template <class T>
Unmanaged1<T> flat(const Unmanaged2<T>& x) {
  return Unmanaged1<T>(x.data(), x.extent(0) * x.extent(1));
}

}  // namespace shardft
