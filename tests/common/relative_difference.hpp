#pragma once
// ||a - b|| / ||b|| in double: how the tests compare whole weight and gradient vectors.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace shardft {
namespace testing_util {

inline double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace testing_util
}  // namespace shardft
