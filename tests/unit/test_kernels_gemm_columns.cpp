// GEMMs on column blocks read and written in place (kernels/gemm.hpp GemmOperand::columns,
// gemm_mixed_to_columns, gemm_mixed_bf16_out_to_columns): a LoRA term's share of a stacked layer's
// output and output gradient. Each product equals the one on a contiguous copy of the block, for every
// op pair and storage, with tiles of one row and of the whole matrix; a written block leaves the
// matrix's other columns as they were.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/bf16_values.hpp"
#include "tests/common/device_build.hpp"
#include "kernels/gemm.hpp"

namespace shardft {
namespace {

using namespace kernel_test;
using namespace testing_util;

constexpr int kM = 7, kN = 5, kK = 6;
constexpr float kAlpha = 0.9f, kBeta = 0.4f;

// A [rows, cols] operand of `values`, whole (extra 0) or as columns [2, 2 + cols) of a [rows, cols + extra]
// matrix whose other columns hold other values; views kept alive by the holder.
struct Operand {
  View2<float> f32;
  View2<bf16> b16;
  GemmOperand of(bool bf16_storage, bool block, int cols) const {
    const GemmOperand whole =
        bf16_storage ? GemmOperand(Unmanaged2<const bf16>(b16)) : GemmOperand(Unmanaged2<const float>(f32));
    return block ? GemmOperand::columns(whole, 2, cols) : whole;
  }
};
Operand make_operand(const std::vector<float>& values, int rows, int cols, int extra, unsigned seed) {
  const int width = cols + extra;
  std::vector<float> all = rounded_to_bf16(random_vector(static_cast<std::size_t>(rows) * width, seed));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) all[static_cast<std::size_t>(r) * width + (extra > 0 ? 2 : 0) + c] = values[r * cols + c];
  }
  return {to_device(all, rows, width, "operand"), to_device_bf16(all, rows, width, "operand16")};
}

TEST(KernelGemmColumns, ColumnBlockOperandsGiveTheProductsOfTheirCopies) {
  const auto a = rounded_to_bf16(random_vector(kM * kK, 31)), b = rounded_to_bf16(random_vector(kK * kN, 32));
  const auto c0 = random_vector(kM * kN, 33);
  const double tol = host_or_device_tol(0.0, 1e-6);
  for (const std::int64_t tile : {std::int64_t{1}, std::int64_t{1} << 20}) {
    ScopedGemmTile scoped(tile);
    for (const Op op_a : {Op::N, Op::T}) {
      for (const Op op_b : {Op::N, Op::T}) {
        const int ar = op_a == Op::N ? kM : kK, ac = op_a == Op::N ? kK : kM;
        const int br = op_b == Op::N ? kK : kN, bc = op_b == Op::N ? kN : kK;
        const Operand whole_a = make_operand(a, ar, ac, 0, 1), whole_b = make_operand(b, br, bc, 0, 2);
        const Operand wide_a = make_operand(a, ar, ac, 5, 3), wide_b = make_operand(b, br, bc, 3, 4);
        for (int storage = 0; storage < 4; ++storage) {  // bf16 x bf16, fp32 x bf16, bf16 x fp32, fp32 x fp32
          const bool a16 = storage == 0 || storage == 2, b16 = storage == 0 || storage == 1;
          const std::string name = "tile " + std::to_string(tile) + " op " + (op_a == Op::N ? "N" : "T") +
                                   (op_b == Op::N ? "N" : "T") + " storage " + std::to_string(storage);
          SCOPED_TRACE(name);
          auto expected = to_device(c0, kM, kN, "expected");
          gemm_mixed(op_a, op_b, kAlpha, whole_a.of(a16, false, ac), whole_b.of(b16, false, bc), kBeta, expected);
          auto c = to_device(c0, kM, kN, "c");
          gemm_mixed(op_a, op_b, kAlpha, wide_a.of(a16, true, ac), wide_b.of(b16, true, bc), kBeta, c);
          expect_all_near(name, to_host(c), to_host(expected), tol, tol);
          // and into a bf16 output, whose rounding of the same sums must agree too
          auto expected16 = to_device_bf16(c0, kM, kN, "expected16");
          gemm_mixed_bf16_out(op_a, op_b, kAlpha, whole_a.of(a16, false, ac), whole_b.of(b16, false, bc), expected16, kBeta);
          auto c16 = to_device_bf16(c0, kM, kN, "c16");
          gemm_mixed_bf16_out(op_a, op_b, kAlpha, wide_a.of(a16, true, ac), wide_b.of(b16, true, bc), c16, kBeta);
          expect_all_near(name + " bf16 out", widened(c16), widened(expected16), host_or_device_tol(0.0, 1e-2),
                          host_or_device_tol(0.0, 1e-2));
        }
      }
    }
  }
}

TEST(KernelGemmColumns, ProductsWrittenIntoColumnBlocksLeaveTheOtherColumns) {
  const int width = kN + 4, col0 = 3;
  const auto a = rounded_to_bf16(random_vector(kM * kK, 41)), b = rounded_to_bf16(random_vector(kN * kK, 42));
  const auto wide = rounded_to_bf16(random_vector(kM * width, 43));
  const auto block0 = column_block(wide, width, col0, kN);
  const auto a16 = to_device_bf16(a, kM, kK, "a16"), b16 = to_device_bf16(b, kN, kK, "b16");
  const GemmOperand ga = Unmanaged2<const bf16>(a16), gb = Unmanaged2<const bf16>(b16);
  const double tol = host_or_device_tol(0.0, 1e-6);
  for (const std::int64_t tile : {std::int64_t{1}, std::int64_t{1} << 20}) {
    ScopedGemmTile scoped(tile);
    SCOPED_TRACE("tile " + std::to_string(tile));
    auto expected = to_device(block0, kM, kN, "expected");
    gemm_mixed(Op::N, Op::T, kAlpha, ga, gb, kBeta, expected);
    auto c = to_device(wide, kM, width, "c");
    gemm_mixed_to_columns(Op::N, Op::T, kAlpha, ga, gb, kBeta, columns_of(Unmanaged2<float>(c), col0, kN));
    const auto got = to_host(c);
    expect_all_near("fp32 block", column_block(got, width, col0, kN), to_host(expected), tol, tol);
    EXPECT_EQ(column_block(got, width, 0, col0), column_block(wide, width, 0, col0));
    EXPECT_EQ(column_block(got, width, col0 + kN, width - col0 - kN), column_block(wide, width, col0 + kN, width - col0 - kN));

    auto expected16 = to_device_bf16(block0, kM, kN, "expected16");
    gemm_mixed_bf16_out(Op::N, Op::T, kAlpha, ga, gb, expected16, kBeta);
    auto c16 = to_device_bf16(wide, kM, width, "c16");
    gemm_mixed_bf16_out_to_columns(Op::N, Op::T, kAlpha, ga, gb, columns_of(Unmanaged2<bf16>(c16), col0, kN), kBeta);
    const auto got16 = widened(c16);
    expect_all_near("bf16 block", column_block(got16, width, col0, kN), widened(expected16),
                    host_or_device_tol(0.0, 1e-2), host_or_device_tol(0.0, 1e-2));
    EXPECT_EQ(column_block(got16, width, 0, col0), column_block(wide, width, 0, col0));
    EXPECT_EQ(column_block(got16, width, col0 + kN, width - col0 - kN),
              column_block(wide, width, col0 + kN, width - col0 - kN));
  }
}

TEST(KernelGemmColumns, BlocksOutsideTheMatrixAndBlocksOfBlocksThrow) {
  const auto m = to_device_bf16(std::vector<float>(12, 1.f), 2, 6, "m");
  const GemmOperand whole = Unmanaged2<const bf16>(m);
  EXPECT_THROW(GemmOperand::columns(whole, 3, 4), std::invalid_argument);
  EXPECT_THROW(GemmOperand::columns(whole, -1, 2), std::invalid_argument);
  const GemmOperand block = GemmOperand::columns(whole, 2, 4);
  EXPECT_EQ(block.extent(0), 2u);
  EXPECT_EQ(block.extent(1), 4u);
  EXPECT_EQ(block.ld(), 6);
  EXPECT_THROW(GemmOperand::columns(block, 0, 2), std::invalid_argument);
  // a block's shape is the one the product checks
  auto b = to_device_bf16(std::vector<float>(8, 1.f), 4, 2, "b");
  auto c = to_device(std::vector<float>(4), 2, 2, "c");
  EXPECT_NO_THROW(gemm_mixed(Op::N, Op::N, 1.f, block, Unmanaged2<const bf16>(b), 0.f, c));
  EXPECT_THROW(gemm_mixed(Op::N, Op::N, 1.f, whole, Unmanaged2<const bf16>(b), 0.f, c), std::invalid_argument);
}

}  // namespace
}  // namespace shardft
