// Block-wise symmetric int8 / int4 quantization (kernels/quantize.hpp), checked against the header's
// formulas computed here on the host, not against the kernel's own arithmetic:
//   scale_k = max_{i in block k} |x_i| / qmax,  q_i = round_half_away_from_zero(x_i / scale_k) in [-qmax, qmax],
//   x'_i = q_i * scale_k,  |x_i - x'_i| <= scale_k / 2;  int4: element 2j low nibble, 2j+1 high, two's complement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/device_traffic.hpp"
#include "kernels/quantize.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

template <class T>
Unmanaged1<const T> cv(const View1<T>& v) { return Unmanaged1<const T>(v.data(), v.extent(0)); }
template <class T>
Unmanaged1<T> mv(const View1<T>& v) { return Unmanaged1<T>(v.data(), v.extent(0)); }

int qmax_of(int bits) { return bits == 8 ? 127 : 7; }

// One quantize + dequantize through the kernels. q holds the quantized values (int4: unpacked from the
// nibbles on the host). deq starts as `init` (or a sentinel) and is dequantized into with `accumulate`.
struct Quantized {
  std::int64_t nonfinite = -1;
  std::vector<int> q;
  std::vector<std::uint8_t> packed;
  std::vector<float> scales, deq;
};

// device_count: the form that adds its count into a device counter (which starts at 3 here, to see it
// add); nonfinite is then what it added.
Quantized run(const std::vector<float>& x, int block, int bits, const std::vector<float>* init = nullptr,
              bool accumulate = false, bool device_count = false) {
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  Quantized r;
  auto dx = to_device(x, "x");
  View1<float> s("scales", quant_blocks(n, block));
  View1<float> out = init ? to_device(*init, "out") : View1<float>("out", n);
  if (!init) Kokkos::deep_copy(out, 12345.f);  // a sentinel: dequantize must overwrite every element
  View1<double> counter("nonfinite", 1);
  Kokkos::deep_copy(counter, 3.0);
  if (bits == 8) {
    View1<std::int8_t> q("q", n);
    if (device_count) {
      quantize_int8(cv(dx), block, mv(q), mv(s), mv(counter));
    } else {
      r.nonfinite = quantize_int8(cv(dx), block, mv(q), mv(s));
    }
    dequantize_int8(cv(q), cv(s), block, mv(out));
    for (const std::int8_t v : to_host(q)) r.q.push_back(v);
  } else {
    View1<std::uint8_t> p("packed", int4_bytes(n));
    if (device_count) {
      quantize_int4(cv(dx), block, mv(p), mv(s), mv(counter));
    } else {
      r.nonfinite = quantize_int4(cv(dx), block, mv(p), mv(s));
    }
    dequantize_int4(cv(p), cv(s), block, mv(out), accumulate);
    r.packed = to_host(p);
    for (std::int64_t i = 0; i < n; ++i) {
      const int nib = (r.packed[i / 2] >> (4 * (i % 2))) & 0xF;
      r.q.push_back(nib >= 8 ? nib - 16 : nib);
    }
  }
  Kokkos::fence();
  if (device_count) r.nonfinite = static_cast<std::int64_t>(to_host(counter)[0] - 3.0);
  r.scales = to_host(s);
  r.deq = to_host(out);
  return r;
}

// Every property of the header on finite input x; returns max_i |x_i - x'_i| / scale_k (recorded as a
// test property `<name>_max_err_over_scale`, visible with --gtest_output=xml).
double check_roundtrip(const std::string& name, const std::vector<float>& x, int block, int bits) {
  const Quantized r = run(x, block, bits);
  const int qmax = qmax_of(bits);
  const std::size_t n = x.size(), nb = static_cast<std::size_t>(quant_blocks(static_cast<std::int64_t>(n), block));
  EXPECT_EQ(r.nonfinite, 0) << name;
  EXPECT_EQ(r.scales.size(), nb) << name;
  if (r.scales.size() != nb) return 0.0;
  double worst = 0.0;
  int reported = 0;
  auto fail = [&](std::size_t i, const std::string& what) {
    if (reported++ < 5) ADD_FAILURE() << name << "[" << i << "] x=" << x[i] << ": " << what;
  };
  for (std::size_t k = 0; k < nb; ++k) {
    const std::size_t b = k * block, e = std::min(n, b + block);
    float amax = 0.f;
    for (std::size_t i = b; i < e; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float want_scale = amax / static_cast<float>(qmax);
    const double s = r.scales[k];
    if (!(std::fabs(s - want_scale) <= 1e-6 * want_scale))
      fail(b, "scale " + std::to_string(s) + " vs max|x|/qmax " + std::to_string(want_scale));
    for (std::size_t i = b; i < e; ++i) {
      const int q = r.q[i];
      const double deq = r.deq[i];
      if (q < -qmax || q > qmax) fail(i, "q=" + std::to_string(q) + " out of range");
      if (deq != static_cast<float>(q) * r.scales[k]) fail(i, "dequantized " + std::to_string(deq) + " != q*scale");
      const double err = std::fabs(static_cast<double>(x[i]) - deq);
      if (s == 0.0) {
        if (deq != 0.0) fail(i, "all-zero block must dequantize to exactly 0, got " + std::to_string(deq));
        continue;
      }
      worst = std::max(worst, err / s);
      if (!(err <= 0.5 * s * (1.0 + 1e-5))) fail(i, "|x - deq| / scale = " + std::to_string(err / s) + " > 1/2");
      if (std::fabs(x[i]) == amax) {  // the block's extreme value maps to +-qmax and back to itself
        if (q != (x[i] > 0 ? qmax : -qmax)) fail(i, "block max must map to +-qmax, got " + std::to_string(q));
        if (!(err <= 1e-6 * amax)) fail(i, "block max dequantized to " + std::to_string(deq));
      }
      const double t = x[i] / s;  // the formula's q, except within fp noise of a .5 tie
      if (std::fabs(std::fabs(t - std::trunc(t)) - 0.5) > 1e-4 && q != static_cast<int>(std::round(t)))
        fail(i, "q=" + std::to_string(q) + " but round(x/scale)=" + std::to_string(std::round(t)));
    }
  }
  ::testing::Test::RecordProperty(name + "_max_err_over_scale", sci(worst));
  return worst;
}

std::vector<float> normal_vector(std::size_t n, std::uint32_t seed, float sigma = 1.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// ---- round trip: (bits, block) over int8 / int4 and blocks 32, 64, 128, 7 (odd: int4 bytes span blocks) ----
class KernelQuantizeRoundTrip : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  int bits() const { return std::get<0>(GetParam()); }
  int block() const { return std::get<1>(GetParam()); }
  std::size_t blk() const { return static_cast<std::size_t>(block()); }
  double check(const std::string& what, const std::vector<float>& x) {
    return check_roundtrip(what + "_int" + std::to_string(bits()) + "_b" + std::to_string(block()), x, block(), bits());
  }
};

TEST_P(KernelQuantizeRoundTrip, NormalDataAtManyScales) {
  auto x = normal_vector(16 * blk(), 11 + block());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] *= std::pow(10.f, static_cast<float>(int(i / blk()) % 9 - 4));
  const double worst = check("normal", x);
  EXPECT_GT(worst, 0.3) << "random data should come close to the half-step bound";
}

TEST_P(KernelQuantizeRoundTrip, AllZeroBlockHasScaleZero) {
  auto x = normal_vector(3 * blk(), 21);
  for (std::size_t i = blk(); i < 2 * blk(); ++i) x[i] = (i % 2) ? -0.f : 0.f;
  check("zero_block", x);
  const Quantized r = run(x, block(), bits());
  EXPECT_EQ(r.scales.at(1), 0.f);
  for (std::size_t i = blk(); i < 2 * blk(); ++i) EXPECT_EQ(r.deq[i], 0.f) << i;
}

TEST_P(KernelQuantizeRoundTrip, OneHugeValueInABlock) {
  auto x = normal_vector(2 * blk(), 31);
  x[blk() / 2] = 1e30f;
  x[blk() + blk() / 3] = -1e30f;
  check("huge", x);
  const Quantized r = run(x, block(), bits());
  EXPECT_FLOAT_EQ(r.scales.at(0), 1e30f / static_cast<float>(qmax_of(bits())));
  EXPECT_EQ(r.q.at(blk() / 2), qmax_of(bits()));
  EXPECT_EQ(r.q.at(blk() + blk() / 3), -qmax_of(bits()));
}

TEST_P(KernelQuantizeRoundTrip, PartialLastBlock) {
  auto x = normal_vector(3 * blk() + blk() / 2 + 1, 41);
  x.back() = 5.f;  // the tail's scale comes from the tail alone
  check("partial", x);
  const Quantized r = run(x, block(), bits());
  ASSERT_EQ(r.scales.size(), 4u);
  EXPECT_FLOAT_EQ(r.scales[3], 5.f / static_cast<float>(qmax_of(bits())));
}

TEST_P(KernelQuantizeRoundTrip, SingleElement) {
  check("single", {-0.3f});
  check("single_zero", {0.f});
  EXPECT_EQ(run({-0.3f}, block(), bits()).q.at(0), -qmax_of(bits()));
}

TEST_P(KernelQuantizeRoundTrip, ValuesExactlyAtPlusMinusMax) {
  auto x = random_vector(4 * blk(), 51);
  for (std::size_t k = 0; k < 4; ++k) {
    const float m = 1.25f * static_cast<float>(k + 1) + 0.1f;
    for (std::size_t i = k * blk(); i < (k + 1) * blk(); ++i) x[i] *= m;
    x[k * blk()] = m;                 // +max and -max in the same block
    x[(k + 1) * blk() - 1] = -m;
  }
  check("exact_max", x);  // checks q = +-qmax and deq = +-max (up to fp rounding) for each of them
}

INSTANTIATE_TEST_SUITE_P(KernelQuantize, KernelQuantizeRoundTrip,
                         ::testing::Combine(::testing::Values(8, 4), ::testing::Values(32, 64, 128, 7)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
                           return "int" + std::to_string(std::get<0>(p.param)) + "_block" +
                                  std::to_string(std::get<1>(p.param));
                         });

// ---- hand-built examples ---------------------------------------------------------------------------------

TEST(KernelQuantizeInt4, PackingLayoutTwoNibblesPerByte) {
  // Block 8 with max 7: scale 1, q = x. A 9th element forms a one-element block: q = -7 (0x9).
  const std::vector<float> x = {7, -7, 1, -1, 0, 3, -4, 2, -2.5f};
  const Quantized r = run(x, 8, 4);
  EXPECT_EQ(r.nonfinite, 0);
  ASSERT_EQ(r.packed.size(), 5u);
  const std::vector<std::uint8_t> want = {0x97, 0xF1, 0x30, 0x2C, 0x09};  // low nibble = element 2j
  for (std::size_t j = 0; j < want.size(); ++j) EXPECT_EQ(int(r.packed[j]), int(want[j])) << "byte " << j;
  EXPECT_EQ(r.scales.at(0), 1.f);
  EXPECT_FLOAT_EQ(r.scales.at(1), 2.5f / 7.f);
}

TEST(KernelQuantizeRounding, HalfAwayFromZero) {
  // Scale 2 (max 254 / 127, 14 / 7): x / scale lands on exact halves; round half away from zero.
  const Quantized r8 = run({254, 1, -1, 3, -5, 127, -253, 0.25f}, 8, 8);
  EXPECT_EQ(r8.scales.at(0), 2.f);
  EXPECT_EQ(r8.q, (std::vector<int>{127, 1, -1, 2, -3, 64, -127, 0}));
  EXPECT_EQ(r8.deq, (std::vector<float>{254, 2, -2, 4, -6, 128, -254, 0}));
  const Quantized r4 = run({14, 1, -1, 3, -5, 13, -9, 0.5f}, 8, 4);
  EXPECT_EQ(r4.scales.at(0), 2.f);
  EXPECT_EQ(r4.q, (std::vector<int>{7, 1, -1, 2, -3, 7, -5, 0}));
  EXPECT_EQ(r4.deq, (std::vector<float>{14, 2, -2, 4, -6, 14, -10, 0}));
}

TEST(KernelQuantizeRounding, JustBelowHalfRoundsTowardZero) {
  // Scale 1: x / scale = 0.49999997 (the float below 0.5) must round to 0 (error 0.49999997 < 1/2), not to
  // 1 (error 0.50000003: above the header's bound). Catches round-by-(int)(r + 0.5f), where the float sum
  // 0.49999997f + 0.5f rounds to 1.0f.
  const float below_half = std::nextafter(0.5f, 0.f), below_1_5 = std::nextafter(1.5f, 0.f);
  const Quantized r8 = run({127, below_half, -below_half, below_1_5}, 4, 8);
  EXPECT_EQ(r8.q, (std::vector<int>{127, 0, 0, 1}));
  const Quantized r4 = run({7, below_half, -below_half, below_1_5}, 4, 4);
  EXPECT_EQ(r4.q, (std::vector<int>{7, 0, 0, 1}));
}

TEST(KernelQuantizeTinyScale, SmallNormalValuesStayWithinHalfStep) {
  // Blocks whose max is a small but normal float (>= FLT_MIN = 1.18e-38): scale = max/qmax is tiny
  // (subnormal here) and 1/scale exceeds FLT_MAX. The header's bound still holds for them.
  check_roundtrip("tiny_int8", {1e-37f, 5e-38f, -2.5e-38f, 0.f, 3e-37f, -1e-37f, 2e-38f}, 4, 8);
  check_roundtrip("tiny_int4", {2e-38f, 1e-38f, -1.3e-38f, 0.f, 1.5e-38f, -1.2e-38f}, 4, 4);
}

// ---- non-finite input ------------------------------------------------------------------------------------

TEST(KernelQuantizeNonFinite, CountsEveryNaNAndInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float specials[] = {nan, inf, -inf, -nan};
  std::mt19937 gen(61);
  for (const int bits : {8, 4}) {
    for (const int block : {7, 64}) {
      const std::string tag = "int" + std::to_string(bits) + " block " + std::to_string(block);
      // Fixed places: first, last, both sides of a block boundary, a run filling a whole block.
      auto x = normal_vector(301, 62);
      const std::size_t fixed[] = {0, 1, 63, 64, 65, 150, 300};
      for (std::size_t j = 0; j < 7; ++j) x[fixed[j]] = specials[j % 4];
      for (std::size_t i = 192; i < 256; ++i) x[i] = specials[i % 4];
      EXPECT_EQ(run(x, block, bits).nonfinite, 7 + 64) << tag;
      // Random places and counts.
      for (int trial = 0; trial < 10; ++trial) {
        auto y = normal_vector(257, 70 + trial);
        std::uniform_int_distribution<std::size_t> pos(0, y.size() - 1);
        std::int64_t bad = 0;
        for (int j = 0; j < trial * 3 + 1; ++j) {
          float& v = y[pos(gen)];
          bad += std::isfinite(v) ? 1 : 0;
          v = specials[(trial + j) % 4];
        }
        EXPECT_EQ(run(y, block, bits).nonfinite, bad) << tag << " trial " << trial;
      }
      EXPECT_EQ(run({nan}, block, bits).nonfinite, 1) << tag;
      EXPECT_EQ(run({-inf}, block, bits).nonfinite, 1) << tag;
      // Extreme but finite values are not counted.
      const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
      EXPECT_EQ(run({big, -big, tiny, -tiny, 0.f, 1.f, -0.f, big}, block, bits).nonfinite, 0) << tag;
    }
  }
}

// The device-counter form (a training step's: no host sync) counts the same and quantizes identically.
TEST(KernelQuantizeNonFinite, DeviceCounterFormMatchesTheHostForm) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const int bits : {8, 4}) {
    for (const int block : {7, 64}) {
      const std::string tag = "int" + std::to_string(bits) + " block " + std::to_string(block);
      const auto x = normal_vector(301, 63);
      const Quantized host = run(x, block, bits), dev = run(x, block, bits, nullptr, false, true);
      EXPECT_EQ(dev.nonfinite, 0) << tag;
      EXPECT_EQ(dev.q, host.q) << tag;
      EXPECT_EQ(dev.packed, host.packed) << tag;
      EXPECT_EQ(dev.scales, host.scales) << tag;
      EXPECT_EQ(dev.deq, host.deq) << tag;
      auto y = x;
      y[0] = nan;
      y[64] = inf;
      y[65] = -inf;
      y[300] = nan;
      EXPECT_EQ(run(y, block, bits, nullptr, false, true).nonfinite, 4) << tag;
    }
  }
  const auto x = to_device(normal_vector(100, 64), "x");
  View1<std::int8_t> q("q", 100);
  View1<float> s("s", 2);
  View1<double> counter("nonfinite", 1);
  const DeviceTraffic before = device_traffic();
  quantize_int8(cv(x), 64, mv(q), mv(s), mv(counter));
  EXPECT_EQ(device_traffic().since(before).syncs, 0);
}

// ---- int4 dequantize into an existing buffer (the qgZ reduction) -----------------------------------------

TEST(KernelQuantizeInt4, DequantizeAccumulateAddsToOutput) {
  for (const int block : {7, 64}) {
    const auto x = normal_vector(203, 81);
    const auto before = random_vector(x.size(), 82, -3.f, 3.f);
    const Quantized fresh = run(x, block, 4);  // overwrite mode (sentinel start): the dequantized values alone
    const Quantized acc = run(x, block, 4, &before, true);
    expect_added_into("accumulate_b" + std::to_string(block), acc.deq, before, fresh.deq);
    const Quantized over = run(x, block, 4, &before, false);
    EXPECT_EQ(over.deq, fresh.deq) << "accumulate=false must overwrite";
  }
}

}  // namespace
}  // namespace shardft
