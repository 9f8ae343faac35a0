// The fused kernel paths against the plain ones they replace in the decoder: packed SwiGLU (gate and
// up from one GEMM, backward in place), the RoPE table rotating q and k in one pass, the one-pass
// RMSNorm backward over many row blocks, and the lane-blocked sum of squares.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/device_build.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/swiglu.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// gu = [g | u] row by row, as the fused gate-up GEMM writes it.
std::vector<float> pack_rows(const std::vector<float>& g, const std::vector<float>& u, int rows, int cols) {
  std::vector<float> gu;
  for (int n = 0; n < rows; ++n) {
    gu.insert(gu.end(), g.begin() + n * cols, g.begin() + (n + 1) * cols);
    gu.insert(gu.end(), u.begin() + n * cols, u.begin() + (n + 1) * cols);
  }
  return gu;
}

TEST(KernelFused, PackedSwiGluEqualsTheTwoInputKernel) {
  const int rows = 7, inter = 37;
  const auto g = random_vector(rows * inter, 301, -8.f, 8.f), u = random_vector(rows * inter, 302);
  const auto ds = random_vector(rows * inter, 303);

  View2<float> s_plain("s_plain", rows, inter), s_packed("s_packed", rows, inter);
  swiglu_forward(to_device(g, rows, inter, "g"), to_device(u, rows, inter, "u"), s_plain);
  auto gu = to_device(pack_rows(g, u, rows, inter), rows, 2 * inter, "gu");
  swiglu_forward_packed(gu, s_packed);
  const auto a = to_host(s_plain), b = to_host(s_packed);
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "s " << i;

  View2<float> dg("dg", rows, inter), du("du", rows, inter);
  swiglu_backward(to_device(g, rows, inter, "g"), to_device(u, rows, inter, "u"), to_device(ds, rows, inter, "ds"), dg,
                  du);
  swiglu_backward_packed_inplace(gu, to_device(ds, rows, inter, "ds"));
  const auto expect = pack_rows(to_host(dg), to_host(du), rows, inter), got = to_host(gu);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expect[i]) << "dgu " << i;
}

TEST(KernelFused, RopeTableRotatesQandKExactlyLikeThePerTokenKernel) {
  const int hd = 64, q_heads = 4, k_heads = 2;
  // Positions restart per packed sample; 300 and 4095 lie beyond a 256-entry table (computed fallback).
  const std::vector<std::int32_t> pos = {0, 1, 2, 3, 0, 1, 255, 300, 4095};
  const int rows = static_cast<int>(pos.size());
  const auto q0 = random_vector(rows * q_heads * hd, 311), k0 = random_vector(rows * k_heads * hd, 312);
  for (const double theta : {10000.0, 1000000.0}) {
    const RopeTable table = make_rope_table(256, hd, theta);
    for (const bool inverse : {false, true}) {
      auto q_ref = to_device(q0, rows, q_heads * hd, "q_ref"), k_ref = to_device(k0, rows, k_heads * hd, "k_ref");
      auto q = to_device(q0, rows, q_heads * hd, "q"), k = to_device(k0, rows, k_heads * hd, "k");
      auto pd = to_device(pos, "pos");
      if (inverse) {
        rope_backward(q_ref, pd, hd, theta);
        rope_backward(k_ref, pd, hd, theta);
      } else {
        rope_forward(q_ref, pd, hd, theta);
        rope_forward(k_ref, pd, hd, theta);
      }
      rope_rotate_qk(q, k, pd, table, inverse);
      const auto qa = to_host(q), qb = to_host(q_ref), ka = to_host(k), kb = to_host(k_ref);
      // Exact on the CPU. On a GPU nvcc contracts the two kernels' products into FMAs differently: a few
      // ulps of the inputs (in [-1, 1]), which q0 cos - q1 sin can cancel down to a small result.
      const auto near = [](float a, float b) { return std::abs(a - b) <= testing_util::host_or_device_tol(0, 3e-7); };
      for (std::size_t i = 0; i < qa.size(); ++i) ASSERT_TRUE(near(qa[i], qb[i])) << "q " << i << " theta " << theta << ": " << qa[i] << " vs " << qb[i];
      for (std::size_t i = 0; i < ka.size(); ++i) ASSERT_TRUE(near(ka[i], kb[i])) << "k " << i << " theta " << theta << ": " << ka[i] << " vs " << kb[i];
    }
  }
}

// rmsnorm_backward (which adds into dx and dw) against the same sums in double.
void expect_rmsnorm_backward_matches_double(int rows, int d, float eps, unsigned seed, double rel_tol, double abs_tol) {
  const auto x = random_vector(static_cast<std::size_t>(rows) * d, seed), w = random_vector(d, seed + 1, 0.5f, 1.5f);
  const auto dy = random_vector(x.size(), seed + 2), dx0 = random_vector(x.size(), seed + 3), dw0 = random_vector(d, seed + 4);
  std::vector<float> rstd(rows);
  for (int n = 0; n < rows; ++n) {
    double ss = 0.0;
    for (int j = 0; j < d; ++j) ss += static_cast<double>(x[n * d + j]) * x[n * d + j];
    rstd[n] = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
  }
  auto dx = to_device(dx0, rows, d, "dx");
  auto dw = to_device(dw0, "dw");
  rmsnorm_backward(to_device(x, rows, d, "x"), to_device(w, "w"), to_device(rstd, "rstd"), to_device(dy, rows, d, "dy"),
                   dx, dw);
  std::vector<double> dx_ref(dx0.begin(), dx0.end()), dw_ref(dw0.begin(), dw0.end());
  for (int n = 0; n < rows; ++n) {
    double gx = 0.0;
    for (int j = 0; j < d; ++j) gx += static_cast<double>(dy[n * d + j]) * w[j] * x[n * d + j];
    const double r = rstd[n];
    for (int j = 0; j < d; ++j) {
      dx_ref[n * d + j] += r * dy[n * d + j] * w[j] - r * r * r * gx / d * x[n * d + j];
      dw_ref[j] += static_cast<double>(dy[n * d + j]) * x[n * d + j] * r;
    }
  }
  expect_all_near("rmsnorm_dx", to_host(dx), dx_ref, rel_tol, abs_tol);
  expect_all_near("rmsnorm_dw", to_host(dw), dw_ref, rel_tol, 10 * abs_tol);
}

TEST(KernelFused, RmsNormBackwardOverManyRowBlocksMatchesDoubleReference) {
  expect_rmsnorm_backward_matches_double(203, 48, 1e-6f, 321, 1e-5, 1e-6);  // four row blocks of 64, the last partial
}

// A row of 1001 columns is wider than any team and no multiple of the four partial sums; 65 rows leave a
// last block of one row.
TEST(KernelFused, RmsNormBackwardWithRowsWiderThanATeam) {
  expect_rmsnorm_backward_matches_double(65, 1001, 1e-5f, 770, 1e-4, 1e-5);
  View2<float> x("x", 4, 8), dy("dy", 4, 8), dx("dx", 4, 8);
  EXPECT_THROW(rmsnorm_backward(x, View1<float>("w", 8), View1<float>("rstd", 4), dy, dx, View1<float>("dw_short", 7)),
               std::invalid_argument);
}

TEST(KernelFused, SumSquaresOverBlocksLanesAndTail) {
  const std::size_t n = 3 * 4096 + 77;  // three full blocks, then a tail shorter than the lane width
  const auto x = random_vector(n, 331, -3.f, 3.f);
  double ref = 0.0;
  for (const float v : x) ref += static_cast<double>(v) * v;
  EXPECT_NEAR(sum_squares(to_device(x, "x")), ref, 1e-12 * ref);
}

}  // namespace
}  // namespace shardft
