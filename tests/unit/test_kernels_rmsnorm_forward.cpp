// The team-per-row RMSNorm forward: rows of any width (not a multiple of the team size, nor of the four
// partial sums each thread keeps, narrower than four columns, wider than any team) against the formula
// in double; y's exact expression w * (x * rstd) given the kernel's own rstd; and reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/rmsnorm.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

struct Forward {
  std::vector<float> y, rstd;
};

Forward run_forward(const std::vector<float>& x, const std::vector<float>& w, int rows, int d, float eps) {
  View2<float> y("y", rows, d);
  View1<float> rstd("rstd", rows);
  rmsnorm_forward(to_device(x, rows, d, "x"), to_device(w, "w"), eps, y, rstd);
  return {to_host(y), to_host(rstd)};
}

void expect_forward_matches_double(int rows, int d, unsigned seed) {
  SCOPED_TRACE("rows " + std::to_string(rows) + " d " + std::to_string(d));
  const float eps = 1e-6f;
  auto x = random_vector(static_cast<std::size_t>(rows) * d, seed, -2.f, 2.f);
  for (int j = 0; j < d; ++j) x[j] *= 1e-3f;  // a row near eps's scale
  const auto w = random_vector(d, seed + 1, 0.5f, 1.5f);
  const Forward got = run_forward(x, w, rows, d, eps);
  std::vector<double> rstd_ref(rows), y_ref(x.size());
  for (int n = 0; n < rows; ++n) {
    double ss = 0.0;
    for (int j = 0; j < d; ++j) ss += static_cast<double>(x[n * d + j]) * x[n * d + j];
    rstd_ref[n] = 1.0 / std::sqrt(ss / d + eps);
    for (int j = 0; j < d; ++j) y_ref[n * d + j] = w[j] * (static_cast<double>(x[n * d + j]) * rstd_ref[n]);
  }
  // An fp32 sum of d squares in column order (one thread) drifts by ~sqrt(d) ulps (1.6e-6 of rstd at
  // d = 4096 on other data); a team's strided partials and tree drift less.
  expect_all_near("rstd", got.rstd, rstd_ref, 4e-6, 0.0);
  expect_all_near("y", got.y, y_ref, 5e-6, 1e-7);
  // y is w * (x * rstd) in float with the rstd the kernel stored, exactly.
  for (int n = 0; n < rows; ++n) {
    for (int j = 0; j < d; ++j) {
      const float want = w[j] * (x[n * d + j] * got.rstd[n]);
      ASSERT_EQ(std::memcmp(&want, &got.y[n * d + j], sizeof(float)), 0) << "row " << n << " column " << j;
    }
  }
}

TEST(KernelRmsNormForward, AnyRowWidthMatchesDoubleReference) {
  // 1 and 3: fewer columns than the four partial sums; 130, 1001, 2051: no power of two (no team size
  // divides them) and a tail after the unrolled part; 2048 and 4096: model widths.
  const int widths[] = {1, 3, 7, 130, 1001, 2048, 2051, 4096};
  unsigned seed = 400;
  for (const int d : widths) expect_forward_matches_double(9, d, seed += 10);
  expect_forward_matches_double(257, 128, 500);  // many q/k-norm rows of one head
}

TEST(KernelRmsNormForward, RunsAreBitwiseReproducible) {
  const int rows = 33, d = 2051;
  const auto x = random_vector(static_cast<std::size_t>(rows) * d, 610), w = random_vector(d, 611, 0.5f, 1.5f);
  const Forward a = run_forward(x, w, rows, d, 1e-5f), b = run_forward(x, w, rows, d, 1e-5f);
  EXPECT_EQ(std::memcmp(a.y.data(), b.y.data(), a.y.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.rstd.data(), b.rstd.data(), a.rstd.size() * sizeof(float)), 0);
}

TEST(KernelRmsNormForward, NoRowsAndMismatchedShapes) {
  View2<float> x("x", 0, 8), y("y", 0, 8);
  EXPECT_NO_THROW(rmsnorm_forward(x, View1<float>("w", 8), 1e-5f, y, View1<float>("rstd", 0)));
  View2<float> x4("x4", 4, 8), y4("y4", 4, 8);
  EXPECT_THROW(rmsnorm_forward(x4, View1<float>("w7", 7), 1e-5f, y4, View1<float>("rstd", 4)), std::invalid_argument);
  EXPECT_THROW(rmsnorm_forward(x4, View1<float>("w", 8), 1e-5f, y4, View1<float>("rstd3", 3)), std::invalid_argument);
  EXPECT_THROW(rmsnorm_forward(x4, View1<float>("w", 8), 1e-5f, View2<float>("y3", 3, 8), View1<float>("rstd", 4)),
               std::invalid_argument);
}

}  // namespace
}  // namespace shardft
