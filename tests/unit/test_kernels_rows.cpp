// Row gather and scatter (kernels/rows.hpp) against index arithmetic on the host.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/rows.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

TEST(KernelRows, GatherRowsPicksTheNamedRowsInOrderWithRepeats) {
  const int n = 9, c = 131;  // more columns than one team's threads on a CPU, not a multiple of 32
  const auto src = random_vector(n * c, 11);
  const std::vector<std::int32_t> rows = {8, 0, 3, 3, 7};
  View2<float> dst("dst", rows.size(), c);
  gather_rows(to_device(src, n, c, "src"), to_device(rows, "rows"), dst);
  const auto got = to_host(dst);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (int j = 0; j < c; ++j) ASSERT_EQ(got[r * c + j], src[rows[r] * c + j]) << "row " << r << " column " << j;
  }
}

TEST(KernelRows, ScatterRowsWritesEachRowToItsDestinationAndSkipsNegativeOnes) {
  const int n = 5, m = 8, c = 67;
  const auto src = random_vector(n * c, 12);
  const std::vector<std::int64_t> dest = {6, -1, 0, 3, -1};
  View2<float> dst("dst", m, c);
  Kokkos::deep_copy(dst, -7.f);
  scatter_rows(to_device(src, n, c, "src"), to_device(dest, "dest"), dst);
  const auto got = to_host(dst);
  std::vector<float> want(m * c, -7.f);
  for (int i = 0; i < n; ++i) {
    if (dest[i] < 0) continue;
    for (int j = 0; j < c; ++j) want[dest[i] * c + j] = src[i * c + j];
  }
  EXPECT_EQ(got, want);
}

TEST(KernelRows, MismatchedShapesAreRefused) {
  View2<float> src("src", 4, 3), dst("dst", 2, 5);
  View1<std::int32_t> rows("rows", 2);
  EXPECT_THROW(gather_rows(src, rows, dst), std::invalid_argument);
  View1<std::int64_t> dest("dest", 3);
  EXPECT_THROW(scatter_rows(src, dest, View2<float>("d", 4, 3)), std::invalid_argument);
}

}  // namespace
}  // namespace shardft
