// GEMMs on bf16 operands (kernels/gemm.hpp gemm_mixed): every op combination and storage combination
// (bf16 x bf16, fp32 x bf16, bf16 x fp32), with tiles of many sizes (one row or column of K per tile, a
// tile that does not divide the matrix, one tile), against the fp32 GEMM of the same values; and the
// bf16 conversions and the bf16 row gather.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/bf16_values.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rows.hpp"

namespace shardft {
namespace {

using namespace kernel_test;
using namespace testing_util;

TEST(KernelGemmBf16, EveryStorageOpAndTileMatchesTheFp32GemmOfTheSameValues) {
  const int m = 7, n = 5, k = 6;
  const float alpha = 0.9f, beta = 0.4f;
  const auto a = rounded_to_bf16(random_vector(m * k, 91)), b = rounded_to_bf16(random_vector(k * n, 92));
  const auto c0 = random_vector(m * n, 93);
  for (const std::int64_t tile : {std::int64_t{1}, std::int64_t{k}, std::int64_t{2 * k + 1}, std::int64_t{1} << 20}) {
    ScopedGemmTile scoped(tile);
    for (const Op op_a : {Op::N, Op::T}) {
      for (const Op op_b : {Op::N, Op::T}) {
        const std::size_t ar = op_a == Op::N ? m : k, ac = op_a == Op::N ? k : m;
        const std::size_t br = op_b == Op::N ? k : n, bc = op_b == Op::N ? n : k;
        auto a32 = to_device(a, ar, ac, "a"), b32 = to_device(b, br, bc, "b");
        auto a16 = to_device_bf16(a, ar, ac, "a16");
        auto b16 = to_device_bf16(b, br, bc, "b16");
        auto ref = to_device(c0, m, n, "ref");
        gemm(op_a, op_b, alpha, a32, b32, beta, ref);
        const auto expected = to_host(ref);
        for (int storage = 0; storage < 3; ++storage) {  // bf16 x bf16, fp32 x bf16, bf16 x fp32
          const std::string name = std::string("tile ") + std::to_string(tile) + " op " + (op_a == Op::N ? "N" : "T") +
                                   (op_b == Op::N ? "N" : "T") + " storage " + std::to_string(storage);
          SCOPED_TRACE(name);
          const GemmOperand ga = storage == 1 ? GemmOperand(Unmanaged2<const float>(a32))
                                              : GemmOperand(Unmanaged2<const bf16>(a16));
          const GemmOperand gb = storage == 2 ? GemmOperand(Unmanaged2<const float>(b32))
                                              : GemmOperand(Unmanaged2<const bf16>(b16));
          auto c = to_device(c0, m, n, "c");
          gemm_mixed(op_a, op_b, alpha, ga, gb, beta, c);
          expect_all_near(name, to_host(c), expected, 1e-6, 1e-6);
        }
      }
    }
  }
}

TEST(KernelGemmBf16, ShapeMismatchThrows) {
  auto a = to_device_bf16(std::vector<float>(6), 2, 3, "a");
  auto b = to_device_bf16(std::vector<float>(8), 4, 2, "b");
  auto c = to_device(std::vector<float>(4), 2, 2, "c");
  EXPECT_THROW(gemm_mixed(Op::N, Op::N, 1.f, Unmanaged2<const bf16>(a), Unmanaged2<const bf16>(b), 0.f, c),
               std::invalid_argument);
}

TEST(KernelBf16, ConversionsRoundAndWidenExactly) {
  const auto x = random_vector(257, 94, -1e3f, 1e3f);
  auto xd = to_device(x);
  View1<bf16> half("half", x.size());
  View1<float> back("back", x.size());
  to_bf16(xd, half);
  to_f32(half, back);
  const auto got = to_host(back);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], round_to_bf16(x[i])) << i;
}

TEST(KernelRows, GatherRowsFromBf16WidensOrCopiesTheChosenRows) {
  const int rows = 6, cols = 5;
  const auto table = rounded_to_bf16(random_vector(rows * cols, 95));
  auto t16 = to_device_bf16(table, rows, cols, "table");
  const std::vector<std::int32_t> pick = {4, 0, 4, 5};
  auto picked = to_device(pick);
  View2<float> out("out", pick.size(), cols);
  gather_rows(Unmanaged2<const bf16>(t16), Unmanaged1<const std::int32_t>(picked), Unmanaged2<float>(out));
  const auto got = to_host(out);
  for (std::size_t r = 0; r < pick.size(); ++r) {
    for (int j = 0; j < cols; ++j) EXPECT_EQ(got[r * cols + j], table[pick[r] * cols + j]);
  }
  View2<bf16> out16("out16", pick.size(), cols);  // into bf16 rows (a bf16 stream): the same values
  gather_rows(Unmanaged2<const bf16>(t16), Unmanaged1<const std::int32_t>(picked), Unmanaged2<bf16>(out16));
  EXPECT_EQ(widened(out16), got);
}

}  // namespace
}  // namespace shardft
