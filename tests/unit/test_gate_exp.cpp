// kernels/gate_exp.hpp: host_exp against the exp of doubles, in units in the last place of the float
// result, over the whole range it serves; its tails and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/gate_exp.hpp"

namespace shardft {
namespace {

// |a - b| in units in the last place of b (a float, b the true value rounded to float).
double ulps(float a, float b) { return std::fabs(static_cast<double>(a) - b) / (std::nextafter(b, INFINITY) - b); }

TEST(GateExp, WithinTwoUlpOverItsRange) {
  double worst = 0, worst_at = 0;
  for (int i = 0; i <= 3500000; ++i) {
    const float x = -87.f + 175.f * static_cast<float>(i) / 3500000.f;
    const float exact = static_cast<float>(std::exp(static_cast<double>(x)));
    const double e = ulps(host_exp(x), exact);
    if (e > worst) {
      worst = e;
      worst_at = x;
    }
  }
  EXPECT_LE(worst, 2.0) << "worst at x = " << worst_at;
  for (const float x : {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-8f, -1e-8f}) {
    EXPECT_LE(ulps(host_exp(x), static_cast<float>(std::exp(static_cast<double>(x)))), 1.0) << x;
  }
  EXPECT_EQ(host_exp(0.f), 1.f);
}

TEST(GateExp, TailsAreClampedAndNanPassesThrough) {
  EXPECT_EQ(host_exp(-1000.f), host_exp(-87.f));
  EXPECT_EQ(host_exp(1000.f), host_exp(88.f));
  EXPECT_TRUE(std::isfinite(host_exp(std::numeric_limits<float>::infinity())));
  EXPECT_GT(host_exp(-87.f), 0.f);
  EXPECT_TRUE(std::isnan(host_exp(std::numeric_limits<float>::quiet_NaN())));
  // The sigmoid it feeds saturates where the clamp acts.
  EXPECT_EQ(1.f / (1.f + host_exp(-100.f)), 1.f);
  EXPECT_LT(1.f / (1.f + host_exp(100.f)), 1e-37f);
}

}  // namespace
}  // namespace shardft
