// fp16 rounding (kernels/fp16.hpp) against exact values of IEEE binary16, and the loss scaler's state
// machine (train/loss_scaler.hpp) against a hand-written sequence of DeepSpeed's rules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/fp16.hpp"
#include "io/safetensors.hpp"
#include "train/loss_scaler.hpp"

namespace shardft {
namespace {

float r16(double x) { return round_to_fp16(static_cast<float>(x)); }

TEST(Fp16Rounding, ExactKnownValues) {
  EXPECT_EQ(r16(65504.0), 65504.f);                 // largest finite
  EXPECT_EQ(r16(65519.99), 65504.f);                // just below the midpoint to 2^16
  EXPECT_EQ(r16(65520.0), std::numeric_limits<float>::infinity());  // the midpoint ties to even: 2^16 -> inf
  EXPECT_EQ(r16(-70000.0), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(r16(std::ldexp(1.0, -14)), std::ldexp(1.f, -14));  // smallest normal
  EXPECT_EQ(r16(std::ldexp(1.0, -24)), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(r16(std::ldexp(1.0, -25)), 0.f);                   // half of it ties to the even 0
  EXPECT_EQ(r16(std::ldexp(1.5, -25)), std::ldexp(1.f, -24));  // above the tie
  EXPECT_EQ(r16(std::ldexp(3.0, -25)), std::ldexp(1.f, -23));  // 1.5 units ties to the even 2 units
  EXPECT_EQ(r16(std::ldexp(5.0, -25)), std::ldexp(1.f, -23));  // 2.5 units ties to the even 2 units
  EXPECT_EQ(r16(1.0 + std::ldexp(1.0, -11)), 1.f);             // ties to even mantissa 0
  EXPECT_EQ(r16(1.0 + std::ldexp(3.0, -11)), 1.f + std::ldexp(1.f, -9));  // ties to even mantissa 2
  EXPECT_EQ(r16(0.1), 0.0999755859375f);
  EXPECT_EQ(r16(-2.0), -2.f);
  EXPECT_TRUE(std::signbit(r16(-1e-30)));  // -0 keeps its sign
  EXPECT_TRUE(std::isnan(r16(std::nan(""))));
  EXPECT_EQ(fp16_bits::from_float(65504.f), 0x7bffu);
  EXPECT_EQ(fp16_bits::from_float(std::ldexp(1.f, -24)), 0x0001u);
  EXPECT_EQ(fp16_bits::from_float(std::numeric_limits<float>::infinity()), 0x7c00u);
}

// Every finite half is a fixed point, and the midpoint between two neighbours rounds to the one with an
// even mantissa, a hair off the midpoint to the nearer: all 63,486 pairs.
TEST(Fp16Rounding, EveryValueAndEveryMidpoint) {
  int pairs = 0;
  for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
    for (std::uint32_t sign : {0u, 0x8000u}) {
      const float v = fp16_bits::to_float(static_cast<std::uint16_t>(h | sign));
      ASSERT_EQ(fp16_bits::from_float(v), h | sign) << std::hex << h;
      if (h + 1 == 0x7c00u) continue;
      const double lo = v, hi = fp16_bits::to_float(static_cast<std::uint16_t>((h + 1) | sign));
      const double mid = (lo + hi) / 2;  // exact in fp32: one more mantissa bit
      const float expect = (h & 1u) ? static_cast<float>(hi) : static_cast<float>(lo);
      ASSERT_EQ(r16(mid), expect) << std::hex << h;
      ASSERT_EQ(r16(std::nextafter(static_cast<float>(mid), static_cast<float>(lo))), static_cast<float>(lo));
      ASSERT_EQ(r16(std::nextafter(static_cast<float>(mid), static_cast<float>(hi))), static_cast<float>(hi));
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 2 * (0x7c00 - 1));
}

TEST(Fp16Rounding, TheBufferKernelRoundsEachElement) {
  const std::vector<float> in = {65520.f, 0.1f, std::ldexp(3.f, -25), -1.f - std::ldexp(3.f, -11), 3.14159f};
  View1<float> x("x", in.size());
  auto h = Kokkos::create_mirror_view(x);
  for (std::size_t i = 0; i < in.size(); ++i) h(i) = in[i];
  Kokkos::deep_copy(x, h);
  round_to_fp16(x, x);
  Kokkos::deep_copy(h, x);
  for (std::size_t i = 0; i < in.size(); ++i) EXPECT_EQ(h(i), round_to_fp16(in[i])) << i;
  EXPECT_EQ(h(4), 3.140625f);
}

LossScalerConfig dyn(double initial, long window, int hysteresis, double min_scale, bool consecutive = false) {
  LossScalerConfig c;
  c.initial_scale = initial;
  c.window = window;
  c.hysteresis = hysteresis;
  c.min_scale = min_scale;
  c.consecutive_hysteresis = consecutive;
  return c;
}

using O = LossScaler::Outcome;

// DeepSpeed's DynamicLossScaler, step by step: (overflow?, expected outcome, expected scale after).
TEST(LossScaler, FollowsDeepSpeedsDynamicRules) {
  struct Step {
    bool overflow;
    O outcome;
    double scale;
  };
  const std::vector<Step> steps = {
      {false, O::apply, 16}, {false, O::apply, 16}, {false, O::apply, 32},  // window 3: doubles at the 3rd
      {true, O::skip, 32},   // hysteresis 2: the first overflow only uses it up
      {true, O::skip, 16},   // the second halves
      {false, O::apply, 16},
      {true, O::skip, 8},    // not consecutive_hysteresis: the good step did not refill it
      {false, O::apply, 8}, {false, O::apply, 8}, {false, O::apply, 16},  // 3 good steps: double, refill
      {true, O::skip, 16},   {true, O::skip, 8}, {true, O::skip, 4}, {true, O::skip, 2},
      {true, O::exhausted, 2},  // at min_loss_scale 2 and still overflowing
  };
  LossScaler s(dyn(16, 3, 2, 2));
  long skipped = 0;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(s.update(steps[i].overflow), steps[i].outcome) << "step " << i;
    EXPECT_EQ(s.scale(), steps[i].scale) << "step " << i;
    skipped += steps[i].overflow;
  }
  EXPECT_EQ(s.skipped_steps(), skipped);
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryGoodStep) {
  LossScaler s(dyn(64, 1000, 2, 1, true));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(s.update(true), O::skip);
    EXPECT_EQ(s.update(false), O::apply);
  }
  EXPECT_EQ(s.scale(), 64);  // never two overflows in a row: never halved
  EXPECT_EQ(s.update(true), O::skip);
  EXPECT_EQ(s.update(true), O::skip);
  EXPECT_EQ(s.scale(), 32);
}

TEST(LossScaler, StaticScaleSkipsButNeverChanges) {
  LossScalerConfig c;
  c.dynamic = false;
  c.initial_scale = 128;
  LossScaler s(c);
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(s.update(i % 7 == 0), i % 7 == 0 ? O::skip : O::apply);
  EXPECT_EQ(s.scale(), 128);
  EXPECT_FALSE(LossScaler().enabled());
  EXPECT_EQ(LossScaler().update(true), O::apply);  // fp16 off: nothing is skipped here
}

TEST(LossScaler, ItsSavedStateContinuesTheSameSequence) {
  LossScaler a(dyn(1024, 4, 2, 1));
  const std::vector<bool> seq = {false, true, false, true, true, false, false, false, false, false, true, false};
  for (std::size_t i = 0; i < 6; ++i) a.update(seq[i]);
  LossScaler b(dyn(1024, 4, 2, 1));
  b.restore(a.state(), "test");
  for (std::size_t i = 6; i < seq.size(); ++i) {
    EXPECT_EQ(a.update(seq[i]), b.update(seq[i])) << i;
    EXPECT_EQ(a.scale(), b.scale()) << i;
  }
  EXPECT_EQ(a.state(), b.state());
  EXPECT_THROW(b.restore(nlohmann::json{{"scale", 2.0}}, "ckpt/metadata.json"), FormatError);
}

}  // namespace
}  // namespace shardft
