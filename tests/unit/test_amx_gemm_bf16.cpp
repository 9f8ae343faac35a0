// kernels/amx_gemm_bf16.hpp: bf16 x bf16 products on AMX tiles against the fp32 GEMM (sgemm) of the same
// bf16 values, for every op combination, shapes that cut through tiles, tile pairs and the kernel's blocks
// of B, row strides wider than the rows, beta (with beta = 0 never reading C) and the bf16 output; and
// kernels/gemm.hpp's bf16 products, which take the AMX path where the CPU has it, against the widened path
// on the same inputs. AMX is a CPU feature, like a GPU: these tests skip, saying why, on a CPU or OS
// without it (the widened path is what runs there, and test_kernels_gemm_bf16.cpp covers it).
#include <gtest/gtest.h>

#include <cblas.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/bf16.hpp"
#include "kernels/gemm.hpp"
#include "tests/common/scoped_amx.hpp"
#include "tests/common/bf16_values.hpp"

namespace shardft {
namespace {

using namespace kernel_test;
using namespace testing_util;

std::vector<std::uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16::round_bits(v[i]);
  return out;
}

struct Shape {
  int m, n, k;
};

// C = alpha op(A) op(B) + beta C on AMX and in sgemm (on the widened values) for one shape and op pair,
// with A and B stored `pad` columns wider than they are used.
void expect_amx_matches_sgemm(const Shape& s, bool ta, bool tb, float alpha, float beta, int pad) {
  const int ar = ta ? s.k : s.m, ac = ta ? s.m : s.k, br = tb ? s.n : s.k, bc = tb ? s.k : s.n;
  const int lda = ac + pad, ldb = bc + pad;
  const auto a = rounded_to_bf16(random_vector(static_cast<std::size_t>(ar) * lda, 31 + s.m));
  const auto b = rounded_to_bf16(random_vector(static_cast<std::size_t>(br) * ldb, 37 + s.n));
  const auto c0 = random_vector(static_cast<std::size_t>(s.m) * s.n, 41 + s.k);
  std::vector<float> expected = c0, got = c0;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, alpha,
              a.data(), lda, b.data(), ldb, beta, expected.data(), s.n);
  if (beta == 0.f) got.assign(got.size(), std::numeric_limits<float>::quiet_NaN());  // beta = 0: C is not read
  const auto a16 = bf16_bits(a), b16 = bf16_bits(b);
  amx::gemm_bf16(ta, tb, s.m, s.n, s.k, alpha, a16.data(), lda, b16.data(), ldb, beta, got.data(), nullptr, s.n);
  const std::string name = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " +
                           (ta ? "T" : "N") + (tb ? "T" : "N") + " pad " + std::to_string(pad);
  // The same exact products summed in another order: fp32 rounding apart, growing with sqrt(k).
  const double tol = 2e-6 * std::sqrt(static_cast<double>(s.k) + 1.0) * 8.0;
  expect_all_near(name, got, expected, tol, tol);

  // The bf16 output: each element the fp32 result rounded once (beta not applied).
  std::vector<std::uint16_t> c16(static_cast<std::size_t>(s.m) * s.n, 0xffff);
  std::vector<float> plain(c16.size());
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, alpha,
              a.data(), lda, b.data(), ldb, 0.f, plain.data(), s.n);
  amx::gemm_bf16(ta, tb, s.m, s.n, s.k, alpha, a16.data(), lda, b16.data(), ldb, 0.f, nullptr, c16.data(), s.n);
  for (std::size_t i = 0; i < c16.size(); ++i) {
    // Rounding a value within the tolerance of `plain` lands on its rounding or a neighbouring bf16 value.
    const float want = round_to_bf16(plain[i]), have = bf16::to_float(c16[i]);
    ASSERT_LE(std::fabs(have - want), std::fabs(want) * (1.f / 128.f) + tol) << name << " bf16 output " << i;
  }
}

TEST(AmxGemmBf16, EveryOpPairAndShapeMatchesSgemmOfTheSameValues) {
  if (!amx::available()) GTEST_SKIP() << "no AMX here: " << amx::describe();
  // One tile and less; one row pair and a ragged second; odd K (a half-filled pair); K past one chunk;
  // K = 0 (C = beta C); a ragged K in three passes of the micro-kernel (each row pair's strip packed pass
  // by pass); and a K long enough (4096: 256 KiB per pair's strip) that B's columns take several blocks
  // (A packed once up front).
  const std::vector<Shape> shapes = {{1, 1, 1},    {7, 5, 6},    {16, 16, 32},   {33, 47, 31},
                                     {64, 96, 65}, {45, 130, 0}, {40, 64, 1100}, {33, 200, 4096}};
  for (const Shape& s : shapes) {
    for (const bool ta : {false, true}) {
      for (const bool tb : {false, true}) {
        expect_amx_matches_sgemm(s, ta, tb, 0.75f, 0.5f, 0);
        expect_amx_matches_sgemm(s, ta, tb, 1.f, 0.f, 3);
      }
    }
  }
}

TEST(AmxGemmBf16, TheModelsBf16ProductsTakeAmxAndMatchTheWidenedPath) {
  if (!amx::available()) GTEST_SKIP() << "no AMX here: " << amx::describe();
  EXPECT_NE(gemm_backend_description(false).find("bf16 x bf16 on AMX tiles"), std::string::npos)
      << gemm_backend_description(false);
  const int m = 70, n = 45, k = 100;
  const auto a = rounded_to_bf16(random_vector(m * k, 51)), b = rounded_to_bf16(random_vector(k * n, 52));
  const auto c0 = random_vector(m * n, 53);
  for (const Op op_a : {Op::N, Op::T}) {
    for (const Op op_b : {Op::N, Op::T}) {
      const std::string name = std::string("op ") + (op_a == Op::N ? "N" : "T") + (op_b == Op::N ? "N" : "T");
      SCOPED_TRACE(name);
      auto a16 = op_a == Op::N ? to_device_bf16(a, m, k, "a") : to_device_bf16(a, k, m, "a");
      auto b16 = op_b == Op::N ? to_device_bf16(b, k, n, "b") : to_device_bf16(b, n, k, "b");
      const GemmOperand ga(Unmanaged2<const bf16>(a16.data(), a16.extent(0), a16.extent(1)));
      const GemmOperand gb(Unmanaged2<const bf16>(b16.data(), b16.extent(0), b16.extent(1)));
      auto on_amx = to_device(c0, m, n, "amx"), by_widening = to_device(c0, m, n, "widened");
      View2<bf16> on_amx16("amx16", m, n), by_widening16("widened16", m, n);
      gemm_mixed(op_a, op_b, 0.5f, ga, gb, 0.25f, on_amx);
      gemm_mixed_bf16_out(op_a, op_b, 0.5f, ga, gb, on_amx16);
      {
        const ScopedAmx off(false);
        EXPECT_FALSE(amx::available());
        gemm_mixed(op_a, op_b, 0.5f, ga, gb, 0.25f, by_widening);
        gemm_mixed_bf16_out(op_a, op_b, 0.5f, ga, gb, by_widening16);
      }
      EXPECT_TRUE(amx::available());
      expect_all_near(name, to_host(on_amx), to_host(by_widening), 1e-5, 1e-5);
      const auto x = widened(on_amx16), y = widened(by_widening16);
      for (std::size_t i = 0; i < x.size(); ++i) ASSERT_LE(std::fabs(x[i] - y[i]), std::fabs(y[i]) / 128.f + 1e-5f) << i;
    }
  }
}

}  // namespace
}  // namespace shardft
