#pragma once
// x . y in a fixed order that vectorises: kLanes independent partial sums (element e into sum e % kLanes),
// added pairwise at the end. One running sum is a chain of n dependent adds, which the compiler may not
// reorder into vector lanes. fp32 and bf16 rows (widened per element) are summed in the same order, so a
// bf16 row's result is its widening's.
#include <cstdint>

namespace shardft {

template <class T>
inline float striped_dot(const T* x, const T* y, std::int64_t n) {
  constexpr int kLanes = 16;
  float part[kLanes] = {};
  std::int64_t e = 0;
  for (; e + kLanes <= n; e += kLanes) {
    for (int l = 0; l < kLanes; ++l) part[l] += static_cast<float>(x[e + l]) * static_cast<float>(y[e + l]);
  }
  for (int l = 0; e < n; ++e, ++l) part[l] += static_cast<float>(x[e]) * static_cast<float>(y[e]);
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) part[l] += part[l + width];
  }
  return part[0];
}

}  // namespace shardft
