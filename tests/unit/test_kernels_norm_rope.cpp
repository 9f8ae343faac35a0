// RMSNorm and RoPE kernels: forward against host loops in double, backward against central
// finite differences of L = sum(out * R), and the add-into / in-place contracts of the headers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// ---- RMSNorm ------------------------------------------------------------------------------

constexpr int kNormRows = 5, kNormDim = 16;
constexpr float kNormEps = 1e-5f;

// Rows of ordinary, large and tiny magnitude: the tiny row is dominated by eps.
std::vector<float> norm_input() {
  std::vector<float> x = random_vector(kNormRows * kNormDim, 11);
  for (int j = 0; j < kNormDim; ++j) {
    x[3 * kNormDim + j] *= 50.f;
    x[4 * kNormDim + j] *= 2e-3f;
  }
  return x;
}

struct NormResult {
  std::vector<float> y, rstd;
};

NormResult run_rmsnorm(const std::vector<float>& x, const std::vector<float>& w) {
  const int rows = static_cast<int>(x.size()) / kNormDim;
  auto xd = to_device(x, rows, kNormDim, "x");
  auto wd = to_device(w, "w");
  View2<float> y("y", rows, kNormDim);
  View1<float> rstd("rstd", rows);
  rmsnorm_forward(xd, wd, kNormEps, y, rstd);
  return {to_host(y), to_host(rstd)};
}

struct NormGrads {
  std::vector<float> dx, dw;
};

NormGrads run_rmsnorm_backward(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy,
                               const std::vector<float>& dx_init, const std::vector<float>& dw_init) {
  const int rows = static_cast<int>(x.size()) / kNormDim;
  auto xd = to_device(x, rows, kNormDim, "x");
  auto wd = to_device(w, "w");
  View2<float> y("y", rows, kNormDim);
  View1<float> rstd("rstd", rows);
  rmsnorm_forward(xd, wd, kNormEps, y, rstd);
  auto dyd = to_device(dy, rows, kNormDim, "dy");
  auto dxd = to_device(dx_init, rows, kNormDim, "dx");
  auto dwd = to_device(dw_init, "dw");
  rmsnorm_backward(xd, wd, rstd, dyd, dxd, dwd);
  return {to_host(dxd), to_host(dwd)};
}

TEST(KernelRmsNorm, ForwardMatchesHostReference) {
  const auto x = norm_input();
  const auto w = random_vector(kNormDim, 12, 0.5f, 1.5f);
  const NormResult got = run_rmsnorm(x, w);
  std::vector<double> y_ref(x.size()), rstd_ref(kNormRows);
  for (int n = 0; n < kNormRows; ++n) {
    double ss = 0.0;
    for (int j = 0; j < kNormDim; ++j) ss += static_cast<double>(x[n * kNormDim + j]) * x[n * kNormDim + j];
    rstd_ref[n] = 1.0 / std::sqrt(ss / kNormDim + kNormEps);
    for (int j = 0; j < kNormDim; ++j) y_ref[n * kNormDim + j] = w[j] * x[n * kNormDim + j] * rstd_ref[n];
  }
  expect_all_near("rmsnorm_rstd", got.rstd, rstd_ref, 1e-5, 0.0);
  expect_all_near("rmsnorm_y", got.y, y_ref, 1e-5, 1e-6);
}

TEST(KernelRmsNorm, BackwardMatchesFiniteDifferences) {
  const auto x = norm_input();
  const auto w = random_vector(kNormDim, 13, 0.5f, 1.5f);
  const auto r = random_vector(x.size(), 14);
  const NormGrads g = run_rmsnorm_backward(x, w, r, std::vector<float>(x.size(), 0.f), std::vector<float>(kNormDim, 0.f));

  // Rows differ in scale by 2.5e4, so the step is 1% of each row's RMS and each row is
  // compared on its own (one row's gradient would otherwise hide another's error).
  std::vector<float> steps(x.size());
  for (int n = 0; n < kNormRows; ++n) {
    double ss = 0.0;
    for (int j = 0; j < kNormDim; ++j) ss += static_cast<double>(x[n * kNormDim + j]) * x[n * kNormDim + j];
    for (int j = 0; j < kNormDim; ++j) steps[n * kNormDim + j] = static_cast<float>(1e-2 * std::sqrt(ss / kNormDim));
  }
  const auto loss_x = [&](const std::vector<float>& xp) { return weighted_sum(run_rmsnorm(xp, w).y, r); };
  const auto dx_num = numeric_gradient(x, loss_x, steps);
  for (int n = 0; n < kNormRows; ++n) {
    const std::vector<float> a(g.dx.begin() + n * kNormDim, g.dx.begin() + (n + 1) * kNormDim);
    const std::vector<double> num(dx_num.begin() + n * kNormDim, dx_num.begin() + (n + 1) * kNormDim);
    expect_gradient_close("rmsnorm_dx_row" + std::to_string(n), a, num);
  }

  const auto loss_w = [&](const std::vector<float>& wp) { return weighted_sum(run_rmsnorm(x, wp).y, r); };
  expect_gradient_close("rmsnorm_dw", g.dw, numeric_gradient(w, loss_w, 1e-2f));
}

TEST(KernelRmsNorm, BackwardAddsIntoDxAndDw) {
  const auto x = norm_input();
  const auto w = random_vector(kNormDim, 15, 0.5f, 1.5f);
  const auto dy = random_vector(x.size(), 16);
  const NormGrads fresh = run_rmsnorm_backward(x, w, dy, std::vector<float>(x.size(), 0.f),
                                               std::vector<float>(kNormDim, 0.f));
  const auto dx0 = random_vector(x.size(), 17, -3.f, 3.f);
  const auto dw0 = random_vector(kNormDim, 18, -3.f, 3.f);
  const NormGrads added = run_rmsnorm_backward(x, w, dy, dx0, dw0);
  expect_added_into("rmsnorm_dx", added.dx, dx0, fresh.dx);
  expect_added_into("rmsnorm_dw", added.dw, dw0, fresh.dw);
}

// Rows as wide as a model's hidden size, and wider than the GPU kernels' batches of a lane's packs
// (8 x 32 packs of 4 forward, 4 x 32 backward): full batches, a partial one (2052 = 513 packs) and a row
// that is not packed at all (2046). Nine rows cross a block of 8 rows per team. Forward, the kept stream
// and backward against the formulas in double on the host.
TEST(KernelRmsNorm, WideRowsMatchTheFormulasInDouble) {
  const int rows = 9;
  for (const int d : {2048, 2052, 2046}) {
    SCOPED_TRACE(d);
    const auto x = random_vector(rows * d, 21, -2.f, 2.f), w = random_vector(d, 22, 0.5f, 1.5f);
    const auto dy = random_vector(rows * d, 23), dx0 = random_vector(rows * d, 24), dw0 = random_vector(d, 25);
    auto xd = to_device(x, rows, d, "x");
    View2<float> y("y", rows, d);
    View1<float> rstd("rstd", rows);
    rmsnorm_forward(xd, to_device(w, "w"), kNormEps, y, rstd);
    std::vector<double> y_ref(x.size()), r_ref(rows), dx_ref(dx0.begin(), dx0.end()), dw_ref(dw0.begin(), dw0.end());
    for (int n = 0; n < rows; ++n) {
      const float* xn = &x[static_cast<std::size_t>(n) * d];
      const float* dyn = &dy[static_cast<std::size_t>(n) * d];
      double ss = 0.0, gx = 0.0;
      for (int j = 0; j < d; ++j) ss += static_cast<double>(xn[j]) * xn[j];
      const double r = 1.0 / std::sqrt(ss / d + kNormEps);
      r_ref[n] = r;
      for (int j = 0; j < d; ++j) gx += static_cast<double>(dyn[j]) * w[j] * xn[j];
      for (int j = 0; j < d; ++j) {
        const std::size_t at = static_cast<std::size_t>(n) * d + j;
        y_ref[at] = w[j] * xn[j] * r;
        dx_ref[at] += r * dyn[j] * w[j] - r * r * r * xn[j] * gx / d;
        dw_ref[j] += static_cast<double>(dyn[j]) * xn[j] * r;
      }
    }
    expect_all_near("rstd", to_host(rstd), r_ref, 1e-5, 0.0);
    expect_all_near("y", to_host(y), y_ref, 1e-5, 1e-6);
    auto dxd = to_device(dx0, rows, d, "dx");
    auto dwd = to_device(dw0, "dw");
    rmsnorm_backward(xd, to_device(w, "w"), rstd, to_device(dy, rows, d, "dy"), dxd, dwd);
    expect_all_near("dx", to_host(dxd), dx_ref, 1e-4, 1e-5);
    expect_all_near("dw", to_host(dwd), dw_ref, 1e-4, 1e-4);
  }
}

// ---- RoPE ---------------------------------------------------------------------------------

constexpr int kRopeHeads = 3, kRopeHeadDim = 8;
// Positions restart at each packed sample; the last one is far out to exercise large angles.
const std::vector<std::int32_t> kRopePos = {0, 1, 2, 0, 1, 4095};

std::vector<float> run_rope(const std::vector<float>& x, const std::vector<std::int32_t>& pos, double theta,
                            bool backward = false) {
  const int rows = static_cast<int>(pos.size());
  auto xd = to_device(x, rows, kRopeHeads * kRopeHeadDim, "x");
  auto pd = to_device(pos, "pos");
  if (backward) {
    rope_backward(xd, pd, kRopeHeadDim, theta);
  } else {
    rope_forward(xd, pd, kRopeHeadDim, theta);
  }
  return to_host(xd);
}

TEST(KernelRope, ForwardMatchesHostRotateHalf) {
  const int width = kRopeHeads * kRopeHeadDim, half = kRopeHeadDim / 2;
  const auto x = random_vector(kRopePos.size() * width, 21);
  for (const double theta : {10000.0, 500000.0}) {
    const auto got = run_rope(x, kRopePos, theta);
    std::vector<double> ref(x.size());
    for (std::size_t n = 0; n < kRopePos.size(); ++n) {
      for (int h = 0; h < kRopeHeads; ++h) {
        const std::size_t base = n * width + h * kRopeHeadDim;
        for (int i = 0; i < half; ++i) {
          const double a = kRopePos[n] * std::pow(theta, -2.0 * i / kRopeHeadDim);
          const double x1 = x[base + i], x2 = x[base + i + half];
          ref[base + i] = x1 * std::cos(a) - x2 * std::sin(a);
          ref[base + i + half] = x2 * std::cos(a) + x1 * std::sin(a);
        }
      }
    }
    expect_all_near(theta == 10000.0 ? "rope_forward_theta1e4" : "rope_forward_theta5e5", got, ref, 0.0, 2e-6);
  }
}

TEST(KernelRope, PositionZeroIsIdentity) {
  const auto x = random_vector(2 * kRopeHeads * kRopeHeadDim, 22);
  const auto got = run_rope(x, {0, 0}, 10000.0);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], x[i]) << i;
}

TEST(KernelRope, BackwardUndoesForward) {
  const auto x = random_vector(kRopePos.size() * kRopeHeads * kRopeHeadDim, 23);
  const auto there = run_rope(x, kRopePos, 10000.0);
  const auto back = run_rope(there, kRopePos, 10000.0, /*backward=*/true);
  expect_all_near("rope_roundtrip", back, x, 0.0, 1e-6);
  // And the rotation actually moved something (a no-op rope would also round-trip).
  double moved = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) moved = std::max(moved, std::fabs(static_cast<double>(there[i]) - x[i]));
  EXPECT_GT(moved, 0.1);
}

TEST(KernelRope, BackwardMatchesFiniteDifferences) {
  const auto x = random_vector(kRopePos.size() * kRopeHeads * kRopeHeadDim, 24);
  const auto r = random_vector(x.size(), 25);
  const double theta = 10000.0;
  const auto dx = run_rope(r, kRopePos, theta, /*backward=*/true);  // dL/dx from dL/dout = R
  const auto loss = [&](const std::vector<float>& xp) { return weighted_sum(run_rope(xp, kRopePos, theta), r); };
  expect_gradient_close("rope_dx", dx, numeric_gradient(x, loss, 1e-2f));
}

}  // namespace
}  // namespace shardft
