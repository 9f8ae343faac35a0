// GEMM dispatch and the linear layer built on it: all four op combinations against a naive loop,
// shape errors, and linear_backward (dx with dx_beta, dW added into) against finite differences.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/gemm.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// C[M,N] = alpha op(A) op(B) + beta C in double, with A, B stored row-major as given.
std::vector<double> naive_gemm(Op op_a, Op op_b, float alpha, const std::vector<float>& a, const std::vector<float>& b,
                               float beta, const std::vector<float>& c, int m, int n, int k) {
  std::vector<double> out(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) {
        const double aip = op_a == Op::N ? a[i * k + p] : a[p * m + i];  // A is [M,K] or [K,M]
        const double bpj = op_b == Op::N ? b[p * n + j] : b[j * k + p];  // B is [K,N] or [N,K]
        acc += aip * bpj;
      }
      out[i * n + j] = static_cast<double>(alpha) * acc + static_cast<double>(beta) * c[i * n + j];
    }
  }
  return out;
}

TEST(KernelGemm, AllOpCombinationsMatchNaiveLoop) {
  const int m = 5, n = 4, k = 3;
  const float alpha = 0.7f, beta = -0.3f;
  for (const Op op_a : {Op::N, Op::T}) {
    for (const Op op_b : {Op::N, Op::T}) {
      const std::string name = std::string("gemm_") + (op_a == Op::N ? "N" : "T") + (op_b == Op::N ? "N" : "T");
      SCOPED_TRACE(name);
      const auto a = random_vector(m * k, 81);
      const auto b = random_vector(k * n, 82);
      const auto c0 = random_vector(m * n, 83);
      auto ad = op_a == Op::N ? to_device(a, m, k, "a") : to_device(a, k, m, "a");
      auto bd = op_b == Op::N ? to_device(b, k, n, "b") : to_device(b, n, k, "b");
      auto cd = to_device(c0, m, n, "c");
      gemm(op_a, op_b, alpha, ad, bd, beta, cd);
      expect_all_near(name, to_host(cd), naive_gemm(op_a, op_b, alpha, a, b, beta, c0, m, n, k), 1e-6, 1e-6);
    }
  }
}

TEST(KernelGemm, BetaZeroIgnoresOldC) {
  const int m = 3, n = 2, k = 4;
  const auto a = random_vector(m * k, 84), b = random_vector(k * n, 85);
  auto cd = to_device(std::vector<float>(m * n, 1e4f), m, n, "c");
  gemm(Op::N, Op::N, 1.f, to_device(a, m, k, "a"), to_device(b, k, n, "b"), 0.f, cd);
  expect_all_near("gemm_beta0", to_host(cd), naive_gemm(Op::N, Op::N, 1.f, a, b, 0.f, std::vector<float>(m * n), m, n, k),
                  1e-6, 1e-6);
}

TEST(KernelGemm, ShapeMismatchThrowsInvalidArgument) {
  View2<float> a("a", 5, 3), b_ok("b", 3, 4), b_bad("b", 4, 4), c_ok("c", 5, 4), c_bad("c", 4, 5);
  EXPECT_NO_THROW(gemm(Op::N, Op::N, 1.f, a, b_ok, 0.f, c_ok));
  EXPECT_THROW(gemm(Op::N, Op::N, 1.f, a, b_bad, 0.f, c_ok), std::invalid_argument);  // inner dims 3 vs 4
  EXPECT_THROW(gemm(Op::N, Op::N, 1.f, a, b_ok, 0.f, c_bad), std::invalid_argument);  // C is [4,5], not [5,4]
  EXPECT_THROW(gemm(Op::T, Op::N, 1.f, a, b_ok, 0.f, c_ok), std::invalid_argument);   // op(A) is [3,5]
  EXPECT_THROW(gemm(Op::N, Op::T, 1.f, a, b_ok, 0.f, c_ok), std::invalid_argument);   // op(B) is [4,3]
}

// ---- linear ---------------------------------------------------------------------------------

constexpr int kTokens = 4, kIn = 6, kOut = 5;

std::vector<float> run_linear(const std::vector<float>& x, const std::vector<float>& w) {
  View2<float> y("y", kTokens, kOut);
  linear_forward(to_device(x, kTokens, kIn, "x"), to_device(w, "w"), y);
  return to_host(y);
}

TEST(KernelLinear, ForwardIsXTimesWTransposedWithRowMajorWeight) {
  const auto x = random_vector(kTokens * kIn, 91), w = random_vector(kOut * kIn, 92);
  std::vector<double> ref(kTokens * kOut, 0.0);
  for (int n = 0; n < kTokens; ++n)
    for (int o = 0; o < kOut; ++o)
      for (int i = 0; i < kIn; ++i) ref[n * kOut + o] += static_cast<double>(x[n * kIn + i]) * w[o * kIn + i];
  expect_all_near("linear_forward", run_linear(x, w), ref, 1e-6, 1e-6);

  // beta = 1 accumulates into y (a residual add fused into the projection).
  const auto y0 = random_vector(kTokens * kOut, 93);
  auto yd = to_device(y0, kTokens, kOut, "y");
  linear_forward(to_device(x, kTokens, kIn, "x"), to_device(w, "w"), yd, 1.f);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += y0[i];
  expect_all_near("linear_forward_beta1", to_host(yd), ref, 1e-6, 1e-6);
}

TEST(KernelLinear, WeightSizeMismatchThrowsInvalidArgument) {
  View2<float> x("x", kTokens, kIn), y("y", kTokens, kOut), dy("dy", kTokens, kOut), dx("dx", kTokens, kIn);
  View1<float> w_bad("w", kOut * kIn - 1), w_ok("w", kOut * kIn), dw_bad("dw", kOut * kIn + 1);
  EXPECT_THROW(linear_forward(x, w_bad, y), std::invalid_argument);
  EXPECT_THROW(linear_backward(x, w_bad, dy, dx, 0.f, w_ok), std::invalid_argument);
  EXPECT_THROW(linear_backward(x, w_ok, dy, dx, 0.f, dw_bad), std::invalid_argument);
}

struct LinearGrads {
  std::vector<float> dx, dw;
};

LinearGrads run_linear_backward(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy,
                                const std::vector<float>& dx_init, float dx_beta, const std::vector<float>& dw_init) {
  auto dxd = to_device(dx_init, kTokens, kIn, "dx");
  auto dwd = to_device(dw_init, "dw");
  linear_backward(to_device(x, kTokens, kIn, "x"), to_device(w, "w"), to_device(dy, kTokens, kOut, "dy"), dxd, dx_beta,
                  dwd);
  return {to_host(dxd), to_host(dwd)};
}

TEST(KernelLinear, BackwardMatchesFiniteDifferences) {
  const auto x = random_vector(kTokens * kIn, 94), w = random_vector(kOut * kIn, 95);
  const auto r = random_vector(kTokens * kOut, 96);
  const LinearGrads g = run_linear_backward(x, w, r, std::vector<float>(x.size(), 0.f), 0.f,
                                            std::vector<float>(w.size(), 0.f));
  const auto loss_x = [&](const std::vector<float>& xp) { return weighted_sum(run_linear(xp, w), r); };
  const auto loss_w = [&](const std::vector<float>& wp) { return weighted_sum(run_linear(x, wp), r); };
  expect_gradient_close("linear_dx", g.dx, numeric_gradient(x, loss_x, 1e-2f));
  expect_gradient_close("linear_dw", g.dw, numeric_gradient(w, loss_w, 1e-2f));
}

TEST(KernelLinear, BackwardAddsIntoDwAndHonoursDxBeta) {
  const auto x = random_vector(kTokens * kIn, 97), w = random_vector(kOut * kIn, 98);
  const auto dy = random_vector(kTokens * kOut, 99);
  const LinearGrads fresh = run_linear_backward(x, w, dy, std::vector<float>(x.size(), 0.f), 0.f,
                                                std::vector<float>(w.size(), 0.f));
  const auto dx0 = random_vector(x.size(), 100, -2.f, 2.f), dw0 = random_vector(w.size(), 101, -2.f, 2.f);

  const LinearGrads accumulated = run_linear_backward(x, w, dy, dx0, 1.f, dw0);
  expect_added_into("linear_dx_beta1", accumulated.dx, dx0, fresh.dx);
  expect_added_into("linear_dw", accumulated.dw, dw0, fresh.dw);

  // dx_beta = 0 overwrites dx whatever it held; dW still accumulates.
  const LinearGrads overwritten = run_linear_backward(x, w, dy, std::vector<float>(x.size(), 1e4f), 0.f, dw0);
  expect_all_near("linear_dx_beta0", overwritten.dx, fresh.dx, 1e-6, 1e-7);
  expect_added_into("linear_dw_again", overwritten.dw, dw0, fresh.dw);
}

}  // namespace
}  // namespace shardft
