// Kernels that write a bf16 step's activations and gradients in bf16 themselves, against the fp32 kernels
// they replace followed by one rounding: the GEMM with a bf16 output (its CPU form in row blocks of fp32
// scratch), RMSNorm's bf16 output and its backward on a bf16 input with a bf16 copy of dx, RoPE on bf16
// q and k, SwiGLU's in-place backward that recomputes forward's s, and cross-entropy over bf16 logits. Exact on the CPU; on a GPU nvcc may
// contract two kernels' products into FMAs differently, which can move a value across a bf16 rounding
// boundary: one bf16 ulp there.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/bf16_values.hpp"
#include "tests/common/scoped_amx.hpp"
#include "tests/common/device_build.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/bf16_pack.hpp"
#include "kernels/swiglu_bf16.hpp"

namespace shardft {
namespace {

using namespace kernel_test;
using namespace testing_util;

// got (bf16 values) equals expected rounded to bf16: exactly on the CPU, within one bf16 ulp on a GPU.
void expect_rounded(const std::string& what, const std::vector<float>& got, const std::vector<float>& expected) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float want = round_to_bf16(expected[i]);
    const double tol = testing_util::host_or_device_tol(0.0, std::ldexp(std::abs(want), -7));
    ASSERT_LE(std::abs(got[i] - want), tol) << what << " element " << i << ": " << got[i] << " vs " << want;
  }
}

// Tiles of one row of C, of a few rows that do not divide C, and of all of C.
TEST(KernelBf16Outputs, GemmWithBf16OutputIsTheFp32ProductRoundedForEveryTile) {
  const int m = 9, n = 5, k = 6;
  const auto a = rounded_to_bf16(random_vector(m * k, 401)), b = rounded_to_bf16(random_vector(k * n, 402));
  for (const std::int64_t tile : {std::int64_t{1}, std::int64_t{2 * n + 1}, std::int64_t{1} << 20}) {
    ScopedGemmTile scoped(tile);
    for (const Op op_a : {Op::N, Op::T}) {
      for (const Op op_b : {Op::N, Op::T}) {
        const std::string name = "tile " + std::to_string(tile) + " op " + (op_a == Op::N ? "N" : "T") +
                                 (op_b == Op::N ? "N" : "T");
        const std::size_t ar = op_a == Op::N ? m : k, ac = op_a == Op::N ? k : m;
        const std::size_t br = op_b == Op::N ? k : n, bc = op_b == Op::N ? n : k;
        auto a16 = to_device_bf16(a, ar, ac, "a16"), b16 = to_device_bf16(b, br, bc, "b16");
        View2<float> ref("ref", m, n);
        gemm_mixed(op_a, op_b, 0.75f, Unmanaged2<const bf16>(a16), Unmanaged2<const bf16>(b16), 0.f, ref);
        View2<bf16> c("c", m, n);
        gemm_mixed_bf16_out(op_a, op_b, 0.75f, Unmanaged2<const bf16>(a16), Unmanaged2<const bf16>(b16), c);
        expect_rounded(name, widened(c), to_host(ref));
      }
    }
  }
}

// beta 1 (a residual branch added into a bf16 stream): C's bf16 values plus the product, in fp32, rounded
// once: what the fp32 GEMM with beta 1 over the same values gives, rounded. On AMX tiles and by widening
// (in tiles of one row, of rows that do not divide C, and of all of C) where this CPU has AMX.
TEST(KernelBf16Outputs, GemmAddingIntoABf16OutputRoundsTheFp32SumOnce) {
  const int m = 37, n = 33, k = 40;
  const auto a = rounded_to_bf16(random_vector(m * k, 403)), b = rounded_to_bf16(random_vector(k * n, 404));
  const auto c0 = rounded_to_bf16(random_vector(m * n, 405, -4.f, 4.f));
  for (const bool amx_on : {true, false}) {
    const ScopedAmx amx_scope(amx_on);
    for (const std::int64_t tile : {std::int64_t{1}, std::int64_t{2 * n + 1}, std::int64_t{1} << 20}) {
      ScopedGemmTile scoped(tile);
      for (const Op op_a : {Op::N, Op::T}) {
        const std::string name = std::string(amx_on ? "amx " : "widened ") + "tile " + std::to_string(tile) +
                                 " op " + (op_a == Op::N ? "NT" : "TT");
        auto a16 = op_a == Op::N ? to_device_bf16(a, m, k, "a16") : to_device_bf16(a, k, m, "a16");
        auto b16 = to_device_bf16(b, n, k, "b16");
        auto ref = to_device(c0, m, n, "ref");
        gemm_mixed(op_a, Op::T, 1.f, Unmanaged2<const bf16>(a16), Unmanaged2<const bf16>(b16), 1.f, ref);
        auto c = to_device_bf16(c0, m, n, "c");
        gemm_mixed_bf16_out(op_a, Op::T, 1.f, Unmanaged2<const bf16>(a16), Unmanaged2<const bf16>(b16), c, 1.f);
        expect_rounded(name, widened(c), to_host(ref));
        std::vector<float> product_only = widened(c);
        gemm_mixed_bf16_out(op_a, Op::T, 1.f, Unmanaged2<const bf16>(a16), Unmanaged2<const bf16>(b16), c);
        EXPECT_NE(widened(c), product_only) << name << ": beta 1 must add C";
      }
    }
  }
}

// The bf16 residual stream's add rounds once, exactly, on every path (also a GPU's): C = 1 and a product
// of 2^-8 + 2^-17 (two exact products) sum to 1 + 2^-8 + 2^-17 in fp32, just above the midpoint between 1
// and the next bf16, 1 + 2^-7: rounded once, 1 + 2^-7. Rounded twice (the product to bf16 first: 2^-8,
// then 1 + 2^-8, a tie, to even) it would be 1. The weight as bf16 (tensor cores, AMX) and as fp32 (the
// widened tiles), beside each other as a model's bf16 and fp32 weight copies run them.
TEST(KernelBf16Outputs, GemmAddingIntoABf16OutputRoundsOnceWhereRoundingTwiceDiffers) {
  const int m = 64, n = 48, k = 32;
  std::vector<float> x(m * k, 0.f), w(n * k, 0.f);
  for (int i = 0; i < m; ++i) {
    x[i * k] = std::ldexp(1.f, -8);
    x[i * k + 1] = std::ldexp(1.f, -17);
  }
  for (int j = 0; j < n; ++j) w[j * k] = w[j * k + 1] = 1.f;
  const float once = 1.f + std::ldexp(1.f, -7);
  ASSERT_EQ(round_to_bf16(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -17)), once);
  ASSERT_EQ(round_to_bf16(1.f + round_to_bf16(std::ldexp(1.f, -8) + std::ldexp(1.f, -17))), 1.f);
  const auto x16 = to_device_bf16(x, m, k, "x16"), w16 = to_device_bf16(w, n, k, "w16");
  const auto w32 = to_device(w, n, k, "w32");
  for (const bool amx_on : {true, false}) {
    const ScopedAmx amx_scope(amx_on);
    for (const bool bf16_weight : {true, false}) {
      const std::string name =
          std::string(amx_on ? "amx allowed, " : "amx off, ") + (bf16_weight ? "bf16" : "fp32") + " weight";
      auto c = to_device_bf16(std::vector<float>(m * n, 1.f), m, n, "c");
      const GemmOperand weight =
          bf16_weight ? GemmOperand(Unmanaged2<const bf16>(w16)) : GemmOperand(Unmanaged2<const float>(w32));
      gemm_mixed_bf16_out(Op::N, Op::T, 1.f, Unmanaged2<const bf16>(x16), weight, c, 1.f);
      EXPECT_EQ(widened(c), std::vector<float>(m * n, once)) << name;
    }
  }
}

TEST(KernelBf16Outputs, RmsNormWithBf16OutputIsTheFp32NormRounded) {
  const int rows = 11, d = 96;
  const auto x = random_vector(rows * d, 411, -3.f, 3.f), w = random_vector(d, 412, 0.5f, 1.5f);
  View2<float> y32("y32", rows, d);
  View2<bf16> y16("y16", rows, d);
  View1<float> r32("r32", rows), r16("r16", rows);
  rmsnorm_forward(to_device(x, rows, d, "x"), to_device(w, "w"), 1e-5f, y32, r32);
  rmsnorm_forward(to_device(x, rows, d, "x"), to_device(w, "w"), 1e-5f, y16, r16);
  EXPECT_EQ(to_host(r16), to_host(r32));
  expect_rounded("rmsnorm y", widened(y16), to_host(y32));
}

// A bf16 stream kept and normed in one pass: its copy, and rstd and y as rmsnorm_forward gives them on its
// widening, bit for bit (within a bf16 ulp on a GPU); x untouched; an empty kept copy is not written.
TEST(KernelBf16Outputs, RmsNormKeepingTheStreamIsItsCopyAndItsNorm) {
  for (const int d : {37, 96, 2052}) {  // 2052: a GPU lane's packs in more than one batch
    SCOPED_TRACE(d);
    const int rows = 11;
    const auto x = rounded_to_bf16(random_vector(rows * d, 415, -3.f, 3.f));
    const auto w = random_vector(d, 416, 0.5f, 1.5f);
    auto x16 = to_device_bf16(x, rows, d, "x16");
    View2<bf16> kept("kept", rows, d), y_two("y_two", rows, d), y_one("y_one", rows, d);
    View1<float> r_two("r_two", rows), r_one("r_one", rows);
    rmsnorm_forward(to_device(x, rows, d, "x32"), to_device(w, "w"), 1e-5f, y_two, r_two);
    rmsnorm_forward_keeping(Unmanaged2<const bf16>(x16), kept, to_device(w, "w"), 1e-5f, y_one, r_one);
    EXPECT_EQ(widened(x16), x);
    EXPECT_EQ(widened(kept), x);
    expect_all_near("rstd", to_host(r_one), to_host(r_two), testing_util::host_or_device_tol(0.0, 1e-6), 0.0);
    expect_rounded("y", widened(y_one), widened(y_two));
    View2<bf16> y_alone("y_alone", rows, d);
    View1<float> r_alone("r_alone", rows);
    rmsnorm_forward_keeping(Unmanaged2<const bf16>(x16), View2<bf16>(), to_device(w, "w"), 1e-5f, y_alone, r_alone);
    EXPECT_EQ(widened(y_alone), widened(y_one));
  }
}

// A norm weight held in bf16 (a bf16 step's compute copy, NormWeight) gives, forward and backward, what its
// fp32 widening gives, bit for bit: the kernels widen it in registers instead of a widened copy.
TEST(KernelBf16Outputs, RmsNormReadsBf16WeightsAsTheirWidening) {
  for (const int d : {37, 96}) {
    SCOPED_TRACE(d);
    const int rows = 70;
    const auto x = random_vector(rows * d, 415, -3.f, 3.f), w = rounded_to_bf16(random_vector(d, 416, 0.5f, 1.5f));
    const auto dy = random_vector(rows * d, 417), dx0 = random_vector(rows * d, 418);
    View1<bf16> w16("w16", d);
    to_bf16(Unmanaged1<const float>(to_device(w, "w_f32").data(), d), w16);
    View2<bf16> y_a("y_a", rows, d), y_b("y_b", rows, d);
    View1<float> r_a("r_a", rows), r_b("r_b", rows);
    rmsnorm_forward(to_device(x, rows, d, "x"), to_device(w, "w"), 1e-5f, y_a, r_a);
    rmsnorm_forward(to_device(x, rows, d, "x"), w16, 1e-5f, y_b, r_b);
    EXPECT_EQ(widened(y_b), widened(y_a));
    EXPECT_EQ(to_host(r_b), to_host(r_a));
    auto dx_a = to_device(dx0, rows, d, "dx_a"), dx_b = to_device(dx0, rows, d, "dx_b");
    View1<float> dw_a("dw_a", d), dw_b("dw_b", d);
    rmsnorm_backward(to_device(x, rows, d, "x"), to_device(w, "w"), r_a, to_device(dy, rows, d, "dy"), dx_a, dw_a);
    rmsnorm_backward(to_device(x, rows, d, "x"), w16, r_a, to_device(dy, rows, d, "dy"), dx_b, dw_b);
    EXPECT_EQ(to_host(dx_b), to_host(dx_a));
    EXPECT_EQ(to_host(dw_b), to_host(dw_a));
  }
}

// Backward reading a bf16 x (the kept residual stream) gives what its fp32 widening gives, bit for bit
// (the same float operations); the rounded dx is the updated dx rounded.
TEST(KernelBf16Outputs, RmsNormBackwardReadsBf16InputAndRoundsItsOutput) {
  const int rows = 70, d = 48;  // more rows than a host team's block of 64
  const auto x = rounded_to_bf16(random_vector(rows * d, 441, -2.f, 2.f)), w = random_vector(d, 442, 0.5f, 1.5f);
  const auto dy = random_vector(rows * d, 443), dx0 = random_vector(rows * d, 444);
  const auto rstd = random_vector(rows, 445, 0.5f, 2.f);
  auto dx32 = to_device(dx0, rows, d, "dx32"), dx16in = to_device(dx0, rows, d, "dx16in");
  View1<float> dw32("dw32", d), dw16("dw16", d);
  View2<bf16> dx_rounded("dx_rounded", rows, d);
  rmsnorm_backward(to_device(x, rows, d, "x"), to_device(w, "w"), to_device(rstd, "rstd"), to_device(dy, rows, d, "dy"),
                   dx32, dw32);
  rmsnorm_backward(Unmanaged2<const bf16>(to_device_bf16(x, rows, d, "x16")), to_device(w, "w"), to_device(rstd, "rstd"),
                   to_device(dy, rows, d, "dy"), dx16in, dw16, dx_rounded);
  EXPECT_EQ(to_host(dx16in), to_host(dx32));
  EXPECT_EQ(to_host(dw16), to_host(dw32));
  expect_rounded("dx rounded", widened(dx_rounded), to_host(dx32));
  View2<bf16> wrong("wrong", rows, d + 1);
  EXPECT_THROW(rmsnorm_backward(to_device(x, rows, d, "x"), to_device(w, "w"), to_device(rstd, "rstd"),
                                to_device(dy, rows, d, "dy"), dx32, dw32, wrong),
               std::invalid_argument);
}

// Backward reading a bf16 dy (the gradient a bf16 step's dgrad GEMM writes at the norm's output) gives what
// its fp32 widening gives, bit for bit, with x in fp32 or bf16; d = 37 takes a GPU's unpacked rows.
TEST(KernelBf16Outputs, RmsNormBackwardReadsBf16GradientAsItsWidening) {
  for (const int d : {37, 96}) {
    SCOPED_TRACE(d);
    const int rows = 70;
    const auto x = rounded_to_bf16(random_vector(rows * d, 451, -2.f, 2.f)), w = random_vector(d, 452, 0.5f, 1.5f);
    const auto dy = rounded_to_bf16(random_vector(rows * d, 453)), dx0 = random_vector(rows * d, 454);
    const auto rstd = random_vector(rows, 455, 0.5f, 2.f);
    const View2<bf16> dy16_held = to_device_bf16(dy, rows, d, "dy16"), x16_held = to_device_bf16(x, rows, d, "x16");
    const Unmanaged2<const bf16> dy16(dy16_held), x16(x16_held);
    for (const bool bf16_x : {false, true}) {
      SCOPED_TRACE(bf16_x ? "bf16 x" : "fp32 x");
      auto dx_a = to_device(dx0, rows, d, "dx_a"), dx_b = to_device(dx0, rows, d, "dx_b");
      View1<float> dw_a("dw_a", d), dw_b("dw_b", d);
      View2<bf16> r_a("r_a", rows, d), r_b("r_b", rows, d);
      if (bf16_x) {
        rmsnorm_backward(x16, to_device(w, "w"), to_device(rstd, "rstd"), to_device(dy, rows, d, "dy"), dx_a, dw_a, r_a);
        rmsnorm_backward(x16, to_device(w, "w"), to_device(rstd, "rstd"), dy16, dx_b, dw_b, r_b);
      } else {
        rmsnorm_backward(to_device(x, rows, d, "x"), to_device(w, "w"), to_device(rstd, "rstd"),
                         to_device(dy, rows, d, "dy"), dx_a, dw_a, r_a);
        rmsnorm_backward(to_device(x, rows, d, "x"), to_device(w, "w"), to_device(rstd, "rstd"), dy16, dx_b, dw_b, r_b);
      }
      EXPECT_EQ(to_host(dx_b), to_host(dx_a));
      EXPECT_EQ(to_host(dw_b), to_host(dw_a));
      EXPECT_EQ(widened(r_b), widened(r_a));
      EXPECT_NE(to_host(dx_b), dx0);  // the gradient was added
    }
  }
}

TEST(KernelBf16Outputs, RopeOnBf16IsTheFp32RotationOfTheSameValuesRounded) {
  const int hd = 64, q_heads = 4, k_heads = 2;
  const std::vector<std::int32_t> pos = {0, 1, 2, 0, 255, 300};  // 300: beyond the table (computed angle)
  const int rows = static_cast<int>(pos.size());
  const auto q0 = rounded_to_bf16(random_vector(rows * q_heads * hd, 421)), k0 = rounded_to_bf16(random_vector(rows * k_heads * hd, 422));
  const RopeTable table = make_rope_table(256, hd, 10000.0);
  auto pd = to_device(pos, "pos");
  for (const bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse" : "forward");
    auto q32 = to_device(q0, rows, q_heads * hd, "q32"), k32 = to_device(k0, rows, k_heads * hd, "k32");
    auto q16 = to_device_bf16(q0, rows, q_heads * hd, "q16"), k16 = to_device_bf16(k0, rows, k_heads * hd, "k16");
    rope_rotate_qk(q32, k32, pd, table, inverse);
    rope_rotate_qk(q16, k16, pd, table, inverse);
    expect_rounded("q", widened(q16), to_host(q32));
    expect_rounded("k", widened(k16), to_host(k32));
  }
}

// q and k as column blocks of one [rows, q | k | v] array (the stacked projection's output): the dense
// rotation's bits, v untouched.
TEST(KernelBf16Outputs, RopeOnColumnBlocksIsTheDenseRotation) {
  const int hd = 64, q_heads = 4, k_heads = 2;
  const std::vector<std::int32_t> pos = {0, 1, 2, 0, 255, 300};
  const std::size_t rows = pos.size(), qd = q_heads * hd, kvd = k_heads * hd, width = qd + 2 * kvd;
  const auto q0 = rounded_to_bf16(random_vector(rows * qd, 423)), k0 = rounded_to_bf16(random_vector(rows * kvd, 424));
  const auto v0 = rounded_to_bf16(random_vector(rows * kvd, 425));
  const RopeTable table = make_rope_table(256, hd, 10000.0);
  auto pd = to_device(pos, "pos");
  for (const bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse" : "forward");
    auto q16 = to_device_bf16(q0, rows, qd, "q16"), k16 = to_device_bf16(k0, rows, kvd, "k16");
    rope_rotate_qk(q16, k16, pd, table, inverse);
    auto qkv = to_device_bf16(side_by_side(q0, qd, k0, kvd, v0, kvd), rows, width, "qkv");
    rope_rotate_qk(columns_of(Unmanaged2<bf16>(qkv), 0, qd), columns_of(Unmanaged2<bf16>(qkv), qd, kvd), pd, table,
                   inverse);
    const auto all = widened(qkv);
    EXPECT_EQ(column_block(all, width, 0, qd), widened(q16));
    EXPECT_EQ(column_block(all, width, qd, kvd), widened(k16));
    EXPECT_EQ(column_block(all, width, qd + kvd, kvd), v0);
  }
}

// The GPU's form (a thread per eight pairs of a head) against the loops this backend runs, on the stacked
// projection's column blocks, a position beyond the table included: the same bits, v untouched. Heads of
// fewer than eight pairs, or rows that do not keep 16-byte alignment, are refused.
TEST(KernelBf16Outputs, RopePackedFormIsTheRotationBitForBit) {
  for (const int hd : {16, 64, 128}) {
    SCOPED_TRACE(hd);
    const int q_heads = 4, k_heads = 2;
    const std::vector<std::int32_t> pos = {0, 1, 2, 0, 255, 300, 17};
    const std::size_t rows = pos.size(), qd = q_heads * hd, kvd = k_heads * hd, width = qd + 2 * kvd;
    const auto all0 = rounded_to_bf16(random_vector(rows * width, 426 + hd));
    const RopeTable table = make_rope_table(256, hd, 10000.0);
    auto pd = to_device(pos, "pos");
    for (const bool inverse : {false, true}) {
      SCOPED_TRACE(inverse ? "inverse" : "forward");
      auto a = to_device_bf16(all0, rows, width, "a"), b = to_device_bf16(all0, rows, width, "b");
      const Unmanaged2<bf16> ua(a), ub(b);
      rope_rotate_qk(columns_of(ua, 0, qd), columns_of(ua, qd, kvd), pd, table, inverse);
      rope_rotate_qk_packed(columns_of(ub, 0, qd), columns_of(ub, qd, kvd), pd, table, inverse);
      const auto packed = widened(b);
      EXPECT_EQ(packed, widened(a));
      EXPECT_NE(packed, all0) << "nothing was rotated";
      EXPECT_EQ(column_block(packed, width, qd + kvd, kvd), column_block(all0, width, qd + kvd, kvd));
    }
  }
  const std::vector<std::int32_t> pos = {0, 1};
  auto pd = to_device(pos, "pos");
  View2<bf16> narrow("narrow", 2, 4 * 8), odd("odd", 2, 3 * 64 + 8);
  EXPECT_THROW(rope_rotate_qk_packed(narrow, narrow, pd, make_rope_table(16, 8, 10000.0), false), std::invalid_argument);
  const Unmanaged2<bf16> uo(odd);
  EXPECT_THROW(rope_rotate_qk_packed(columns_of(uo, 4, 128), columns_of(uo, 132, 64), pd, make_rope_table(16, 64, 10000.0),
                                     false),
               std::invalid_argument);
}

// Backward in place over gu, with ds in bf16: [dg | du] as the fp32 packed kernel gives them from the same
// inputs, rounded; s as forward wrote it, bit for bit (the same expression, the same inputs), and as the
// fp32 forward gives it, rounded. At 37 columns every row is read element by element; at 40 in packs of 8
// (16-byte accesses, kernels/bf16_pack.hpp).
TEST(KernelBf16Outputs, SwiGluBackwardInPlaceRecomputesForwardsOutput) {
  for (const int inter : {37, 40}) {
    SCOPED_TRACE(inter);
    const int rows = 7;
    const auto gu0 = rounded_to_bf16(random_vector(rows * 2 * inter, 431, -8.f, 8.f));
    const auto ds0 = rounded_to_bf16(random_vector(rows * inter, 432));
    auto gu16 = to_device_bf16(gu0, rows, 2 * inter, "gu16");
    View2<bf16> s_forward("s_forward", rows, inter), s_again("s_again", rows, inter);
    const auto ds16 = to_device_bf16(ds0, rows, inter, "ds16");
    EXPECT_EQ(bf16_pack_fits(inter, {gu16.data(), s_forward.data(), s_again.data(), ds16.data()}), inter % 8 == 0);
    swiglu_forward_packed_bf16(gu16, s_forward);
    swiglu_backward_packed_bf16(gu16, ds16, s_again);
    const auto s_a = widened(s_forward), s_b = widened(s_again);
    for (std::size_t i = 0; i < s_a.size(); ++i) ASSERT_EQ(s_a[i], s_b[i]) << "s " << i;
    // s written over ds itself (the MLP's one scratch): the same [dg | du] and s.
    auto gu_alias = to_device_bf16(gu0, rows, 2 * inter, "gu_alias");
    auto ds_then_s = to_device_bf16(ds0, rows, inter, "ds_then_s");
    swiglu_backward_packed_bf16(gu_alias, ds_then_s, ds_then_s);
    const auto s_c = widened(ds_then_s), dgu_a = widened(gu16), dgu_c = widened(gu_alias);
    for (std::size_t i = 0; i < s_a.size(); ++i) ASSERT_EQ(s_a[i], s_c[i]) << "s over ds " << i;
    for (std::size_t i = 0; i < dgu_a.size(); ++i) ASSERT_EQ(dgu_a[i], dgu_c[i]) << "dgu with s over ds " << i;
    View2<float> s32("s32", rows, inter);
    swiglu_forward_packed(to_device(gu0, rows, 2 * inter, "gu32_forward"), s32);
    expect_rounded("s", s_a, to_host(s32));

    auto gu32 = to_device(gu0, rows, 2 * inter, "gu32");
    swiglu_backward_packed_inplace(gu32, to_device(ds0, rows, inter, "ds32"));
    expect_rounded("dgu", widened(gu16), to_host(gu32));

    View2<bf16> wrong("wrong", rows, inter + 1);
    EXPECT_THROW(swiglu_backward_packed_bf16(gu16, ds16, wrong), std::invalid_argument);
  }
}

// Cross-entropy over bf16 logits (a bf16 step's LM head output): the loss of their fp32 widening, bit for
// bit, and its gradient rounded, written in place; an ignored row's gradient is zero. A vocabulary of a
// multiple of eight reads the rows in 16-byte packs, another element by element.
TEST(KernelBf16Outputs, CrossEntropyOverBf16LogitsIsTheFp32LossOfTheSameValues) {
  for (const int vocab : {300, 296}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const int rows = 5;
    const auto z = rounded_to_bf16(random_vector(rows * vocab, 451, -6.f, 6.f));
    const std::vector<std::int32_t> targets = {3, kIgnoreIndex, vocab - 1, 0, 150};
    auto t = to_device(targets, "targets");
    View1<double> sum32("sum32", 1), sum16("sum16", 1);
    auto z32 = to_device(z, rows, vocab, "z32");
    auto z16 = to_device_bf16(z, rows, vocab, "z16");
    cross_entropy_forward_backward(Unmanaged2<float>(z32), t, 0.25f, sum32);
    cross_entropy_forward_backward(Unmanaged2<bf16>(z16), t, 0.25f, sum16);
    EXPECT_NEAR(to_host(sum16)[0], to_host(sum32)[0], testing_util::host_or_device_tol(0.0, 1e-5));
    const auto g = widened(z16);
    expect_rounded("dlogits", g, to_host(z32));
    for (int v = 0; v < vocab; ++v) ASSERT_EQ(g[vocab + v], 0.f) << v;
    View1<double> fwd16("fwd16", 1);
    cross_entropy_forward(Unmanaged2<const bf16>(to_device_bf16(z, rows, vocab, "z16b")), t, fwd16);
    EXPECT_EQ(to_host(fwd16)[0], to_host(sum16)[0]);
  }
}

}  // namespace
}  // namespace shardft
