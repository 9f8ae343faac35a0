// AdamW against a host reimplementation of PyTorch's formulas, bf16 round-to-nearest-even against
// hand-picked values and an independent nearest-value reference, and the small elementwise kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/adamw.hpp"
#include "kernels/bf16.hpp"
#include "kernels/elementwise.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// ---- AdamW ----------------------------------------------------------------------------------

// torch.optim.AdamW (single-tensor path), in double, with the fp32 hyperparameters it would see:
//   p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
struct HostAdamW {
  std::vector<double> p, m, v;
  void step(const AdamWHyper& h, const std::vector<float>& g) {
    const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
    const double bc1 = 1.0 - std::pow(b1, static_cast<double>(h.step));
    const double bc2 = 1.0 - std::pow(b2, static_cast<double>(h.step));
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1.0 - lr * wd;
      m[i] = b1 * m[i] + (1.0 - b1) * g[i];
      v[i] = b2 * v[i] + (1.0 - b2) * static_cast<double>(g[i]) * g[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

// Every element within 1e-6 of the largest reference magnitude (m and p can cancel to ~0, where a
// per-element relative bound would measure nothing but fp32 rounding of the cancelled terms).
void expect_close_1e6(const std::string& name, const View1<float>& got, const std::vector<double>& ref) {
  double scale = 0.0;
  for (const double r : ref) scale = std::max(scale, std::fabs(r));
  expect_all_near(name, to_host(got), ref, 1e-6, 1e-6 * scale);
}

void run_adamw_steps(AdamWHyper h, int steps, long first_step, float grad_scale, const std::string& name) {
  const std::size_t n = 64;
  const auto p0 = random_vector(n, 141);
  HostAdamW ref{std::vector<double>(p0.begin(), p0.end()), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  auto p = to_device(p0, "p");
  View1<float> m("m", n), v("v", n);
  for (int s = 0; s < steps; ++s) {
    auto g = random_vector(n, 150 + s, -grad_scale, grad_scale);
    g[0] = 0.f;  // a parameter with no gradient still decays
    h.step = first_step + s;
    adamw_update(h, p, to_device(g, "g"), m, v);
    ref.step(h, g);
  }
  expect_close_1e6(name + "_param", p, ref.p);
  expect_close_1e6(name + "_m", m, ref.m);
  expect_close_1e6(name + "_v", v, ref.v);
  // The optimizer moved the parameters (by more than the tolerance), so the check means something.
  double moved = 0.0;
  const auto p_now = to_host(p);
  for (std::size_t i = 0; i < n; ++i) moved = std::max(moved, std::fabs(static_cast<double>(p_now[i]) - p0[i]));
  EXPECT_GT(moved, 1e-4) << name;
}

TEST(KernelAdamW, OneStepMatchesPyTorchFormula) {
  AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.1f;
  run_adamw_steps(h, 1, 1, 1.f, "adamw_1step");
}

TEST(KernelAdamW, SeveralStepsMatchPyTorchFormula) {
  AdamWHyper h;
  h.lr = 3e-3f;
  h.beta1 = 0.8f;
  h.beta2 = 0.95f;
  h.weight_decay = 0.05f;
  run_adamw_steps(h, 6, 1, 1.f, "adamw_6steps");
}

TEST(KernelAdamW, LateStepsUseTheirBiasCorrection) {
  AdamWHyper h;
  h.lr = 1e-2f;
  h.weight_decay = 0.01f;
  run_adamw_steps(h, 3, 1000, 1.f, "adamw_step1000");
}

TEST(KernelAdamW, EpsIsAddedAfterTheBiasCorrectedRoot) {
  // Gradients of order eps make the placement of eps visible (sqrt(v/bc2) + eps, not sqrt(v/bc2 + eps)).
  AdamWHyper h;
  h.lr = 1e-1f;
  h.eps = 1e-3f;
  run_adamw_steps(h, 3, 1, 2e-3f, "adamw_large_eps");
}

// ---- bf16 -----------------------------------------------------------------------------------

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
bool is_nan_bits16(std::uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

// Independent of the kernel's bit trick: take the two bf16 neighbours of f (truncate, and one step
// away from zero, where one step past the largest finite is inf standing for 2^128) and pick the
// nearer in exact double arithmetic, ties to the even one.
std::uint16_t nearest_even_reference(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t lo = u & 0xffff0000u;
  if (lo == u) return static_cast<std::uint16_t>(u >> 16);
  const std::uint32_t hi = lo + 0x10000u;
  const auto value = [](std::uint32_t b) {
    const double sign = (b & 0x80000000u) ? -1.0 : 1.0;
    return (b & 0x7fffffffu) == 0x7f800000u ? sign * std::ldexp(1.0, 128) : static_cast<double>(float_of(b));
  };
  const double dlo = std::fabs(static_cast<double>(f) - value(lo)), dhi = std::fabs(value(hi) - f);
  if (dlo < dhi) return static_cast<std::uint16_t>(lo >> 16);
  if (dhi < dlo) return static_cast<std::uint16_t>(hi >> 16);
  return static_cast<std::uint16_t>(((lo >> 16) & 1u) == 0 ? lo >> 16 : hi >> 16);
}

TEST(KernelBf16, HandPickedValuesRoundToNearestEven) {
  struct Case {
    std::uint32_t in;
    std::uint16_t out;
    const char* what;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80u, "1.0 is exact"},
      {0x3f808000u, 0x3f80u, "1 + 2^-8: halfway, rounds down to even 1.0"},
      {0x3f818000u, 0x3f82u, "1 + 3*2^-8: halfway, rounds up to even"},
      {0x3f808001u, 0x3f81u, "just above halfway rounds up"},
      {0x3f817fffu, 0x3f81u, "just below halfway rounds down"},
      {0xbf808000u, 0xbf80u, "negative halfway to even"},
      {0xbf818000u, 0xbf82u, "negative halfway away from zero to even"},
      {0x3fffffffu, 0x4000u, "carry into the exponent"},
      {0x00000000u, 0x0000u, "+0"},
      {0x80000000u, 0x8000u, "-0 keeps its sign"},
      {0x00000001u, 0x0000u, "smallest fp32 subnormal rounds to 0"},
      {0x00008000u, 0x0000u, "subnormal halfway, to even 0"},
      {0x00018000u, 0x0002u, "subnormal halfway, to even 2"},
      {0x00010000u, 0x0001u, "smallest bf16 subnormal is exact"},
      {0x00800000u, 0x0080u, "smallest normal is exact"},
      {0x7f7f7fffu, 0x7f7fu, "just below halfway past the largest bf16 stays finite"},
      {0x7f7f8000u, 0x7f80u, "halfway past the largest bf16 overflows to inf"},
      {0x7f7fffffu, 0x7f80u, "FLT_MAX overflows to inf"},
      {0xff7fffffu, 0xff80u, "-FLT_MAX overflows to -inf"},
      {0x7f800000u, 0x7f80u, "inf"},
      {0xff800000u, 0xff80u, "-inf"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(bf16::round_bits(float_of(c.in)), c.out) << c.what;
    EXPECT_EQ(bf16(float_of(c.in)).bits, c.out) << c.what;
    EXPECT_EQ(bits_of(round_to_bf16(float_of(c.in))), static_cast<std::uint32_t>(c.out) << 16) << c.what;
  }
  EXPECT_EQ(static_cast<float>(bf16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(bf16(-2.5f)), -2.5f);  // exactly representable
  EXPECT_EQ(static_cast<float>(bf16(3.14159265f)), 3.140625f);
}

TEST(KernelBf16, NanStaysNan) {
  // Quiet, signalling (payload in the low bits only: naive rounding would make it inf), all-ones, negative.
  for (const std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0x7fffffffu, 0xffc00000u, 0xff800001u}) {
    const std::uint16_t b = bf16::round_bits(float_of(nan));
    EXPECT_TRUE(is_nan_bits16(b)) << std::hex << nan << " -> " << b;
    EXPECT_EQ(b & 0x8000u, (nan >> 16) & 0x8000u) << std::hex << nan << ": sign";
    EXPECT_TRUE(std::isnan(round_to_bf16(float_of(nan)))) << std::hex << nan;
  }
}

TEST(KernelBf16, MatchesNearestEvenReferenceAroundEveryBf16Value) {
  // For every bf16 value: the exact value, the ties on either side and their neighbours.
  int mismatches = 0;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const float f = float_of((b << 16) | low);
      if (std::isnan(f)) continue;
      if (bf16::round_bits(f) != nearest_even_reference(f) && mismatches++ < 5) {
        ADD_FAILURE() << std::hex << "input 0x" << bits_of(f) << ": got 0x" << bf16::round_bits(f) << ", want 0x"
                      << nearest_even_reference(f);
      }
    }
  }
  std::mt19937 gen(161);
  for (int i = 0; i < 200000; ++i) {
    const float f = float_of(static_cast<std::uint32_t>(gen()));
    if (std::isnan(f)) continue;
    if (bf16::round_bits(f) != nearest_even_reference(f) && mismatches++ < 10) {
      ADD_FAILURE() << std::hex << "input 0x" << bits_of(f) << ": got 0x" << bf16::round_bits(f);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(KernelElementwise, RoundToBf16KernelMatchesScalarRounding) {
  std::vector<float> src = random_vector(257, 171, -100.f, 100.f);
  for (const std::uint32_t special : {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u, 0x7fc00000u, 0x00000001u})
    src.push_back(float_of(special));
  View1<float> dst("dst", src.size());
  round_to_bf16(to_device(src, "src"), dst);
  const auto got = to_host(dst);
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (std::isnan(src[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    EXPECT_EQ(bits_of(got[i]), static_cast<std::uint32_t>(nearest_even_reference(src[i])) << 16) << i;
  }
}

// What an activation kept as bf16 leaves behind: the bf16 copy and the rounded fp32 values agree.
TEST(KernelElementwise, RoundAndCopyToBf16LeavesTheSameNumbersInBoth) {
  const std::vector<float> src = random_vector(300, 173, -50.f, 50.f);
  auto x = to_device(src, "x");
  View1<bf16> kept("kept", src.size());
  View1<float> widened("widened", src.size()), want("want", src.size());
  round_and_copy_to_bf16(x, kept);
  to_f32(kept, widened);
  round_to_bf16(to_device(src, "src"), want);
  const auto got = to_host(x), got_kept = to_host(widened), expect = to_host(want);
  for (std::size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(bits_of(got[i]), bits_of(expect[i])) << i;
    EXPECT_EQ(bits_of(got_kept[i]), bits_of(expect[i])) << i;
  }
}

// ---- elementwise ----------------------------------------------------------------------------

TEST(KernelElementwise, AddScaleAndSumSquares) {
  const auto y0 = random_vector(101, 181), x = random_vector(101, 182);
  auto y = to_device(y0, "y");
  add_inplace(y, to_device(x, "x"));
  auto got = to_host(y);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], y0[i] + x[i]) << i;

  scale_inplace(y, -0.5f);
  const auto scaled = to_host(y);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(scaled[i], got[i] * -0.5f) << i;

  double ref = 0.0;
  for (const float s : scaled) ref += static_cast<double>(s) * s;
  EXPECT_NEAR(sum_squares(y), ref, 1e-12 * ref);
  EXPECT_EQ(sum_squares(View1<float>("empty", 0)), 0.0);
}

TEST(KernelElementwise, SumSquaresAccumulatesInDouble) {
  // 2^24 + 1 is not an fp32 number: an fp32 accumulator would lose the final 1.
  std::vector<float> x(3, 0.f);
  x[0] = 4096.f;  // 2^24
  x[1] = 1.f;
  EXPECT_EQ(sum_squares(to_device(x, "x")), 16777217.0);
}

TEST(KernelElementwise, AllFiniteDetectsInfAndNan) {
  std::vector<float> x = random_vector(50, 191);
  EXPECT_TRUE(all_finite(to_device(x, "x")));
  EXPECT_TRUE(all_finite(View1<float>("empty", 0)));
  for (const float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    auto y = x;
    y[37] = bad;
    EXPECT_FALSE(all_finite(to_device(y, "x"))) << bad;
  }
  x[10] = std::numeric_limits<float>::max();
  x[11] = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(all_finite(to_device(x, "x")));
}

TEST(KernelElementwise, FlatViewsTheRowMajorBuffer) {
  const auto host = random_vector(12, 195);
  View2<float> x2 = to_device(host, 3, 4, "x2");
  Unmanaged2<float> u2 = x2;
  Unmanaged1<float> f = flat(u2);
  ASSERT_EQ(f.extent(0), 12u);
  EXPECT_EQ(f.data(), x2.data());
  const auto back = to_host(f);
  for (std::size_t i = 0; i < host.size(); ++i) EXPECT_EQ(back[i], host[i]) << i;
}

}  // namespace
}  // namespace shardft
