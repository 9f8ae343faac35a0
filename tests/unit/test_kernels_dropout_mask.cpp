// kernels/dropout_mask.hpp: the keep rate is 1 - p within a few sigma, the mask is a pure function of
// (stream, row key, column) — the same on a second call and for a row wherever it sits — and a different
// step, layer, module or row key draws a different one; dropout_apply scales the kept values by 1/(1-p),
// and its bf16 outputs are the fp32 results rounded once.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/dropout_mask.hpp"
#include "tests/common/bf16_values.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

constexpr std::int64_t kRows = 512, kCols = 1024;

std::vector<float> keep_of(float p, std::uint64_t stream, const View1<std::uint64_t>& keys) {
  View2<float> keep("keep", keys.extent(0), kCols);
  dropout_keep(DropoutMask{p, stream, keys}, keep);
  return to_host(keep);
}

View1<std::uint64_t> sample_keys(std::int32_t first_sample) {
  std::vector<std::int32_t> samples, positions;
  for (std::int64_t n = 0; n < kRows; ++n) {
    samples.push_back(first_sample + static_cast<std::int32_t>(n / 64));
    positions.push_back(static_cast<std::int32_t>(n % 64));
  }
  View1<std::uint64_t> keys("keys", kRows);
  dropout_row_keys(to_device(samples), to_device(positions), keys);
  return keys;
}

double fraction_different(const std::vector<float>& a, const std::vector<float>& b) {
  std::int64_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff += a[i] != b[i];
  return static_cast<double>(diff) / static_cast<double>(a.size());
}

TEST(DropoutMask, KeepRateIsOneMinusPWithinFiveSigma) {
  const auto keys = sample_keys(0);
  for (float p : {0.05f, 0.1f, 0.5f}) {
    const auto keep = keep_of(p, dropout_stream(42, 3, 1, 2), keys);
    double kept = 0;
    for (float k : keep) kept += k;
    const double n = static_cast<double>(keep.size()), rate = kept / n;
    const double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_LT(std::abs(rate - (1 - p)), 5 * sigma) << "p " << p << ": keep rate " << rate;
    std::printf("p %.2f: keep rate %.5f over %.0f elements (1-p %.2f, sigma %.1e)\n", p, rate, n, 1 - p, sigma);
  }
}

TEST(DropoutMask, DeterministicAndKeyedOnEveryCoordinate) {
  const float p = 0.1f;
  const auto keys = sample_keys(0);
  const auto base = keep_of(p, dropout_stream(42, 3, 1, 2), keys);
  EXPECT_EQ(base, keep_of(p, dropout_stream(42, 3, 1, 2), keys));
  // Two independent masks differ where exactly one drops: 2 p (1 - p) of the elements.
  const double expected = 2 * p * (1 - p);
  for (const auto& [what, other] :
       std::vector<std::pair<const char*, std::vector<float>>>{{"seed", keep_of(p, dropout_stream(43, 3, 1, 2), keys)},
                                                               {"step", keep_of(p, dropout_stream(42, 4, 1, 2), keys)},
                                                               {"layer", keep_of(p, dropout_stream(42, 3, 0, 2), keys)},
                                                               {"module", keep_of(p, dropout_stream(42, 3, 1, 3), keys)},
                                                               {"sample", keep_of(p, dropout_stream(42, 3, 1, 2),
                                                                                  sample_keys(100))}}) {
    const double f = fraction_different(base, other);
    EXPECT_NEAR(f, expected, 0.01) << "another " << what;
  }
  // Columns within a row and positions within a sample are not copies of each other.
  double same_cols = 0, same_rows = 0;
  for (std::int64_t c = 0; c + 1 < kCols; ++c) same_cols += base[c] == base[c + 1];
  for (std::int64_t c = 0; c < kCols; ++c) same_rows += base[c] == base[kCols + c];
  EXPECT_NEAR(same_cols / (kCols - 1), 1 - expected, 0.05);
  EXPECT_NEAR(same_rows / kCols, 1 - expected, 0.05);
}

TEST(DropoutMask, ARowsMaskFollowsItsKeyNotItsPlace) {
  const auto keys = to_host(sample_keys(0));
  std::vector<std::uint64_t> reversed(keys.rbegin(), keys.rend());
  const std::uint64_t stream = dropout_stream(1, 2, 3, 4);
  const auto a = keep_of(0.3f, stream, to_device(keys)), b = keep_of(0.3f, stream, to_device(reversed));
  for (std::int64_t n = 0; n < kRows; ++n) {
    for (std::int64_t c = 0; c < kCols; ++c) ASSERT_EQ(a[n * kCols + c], b[(kRows - 1 - n) * kCols + c]) << n << ", " << c;
  }
}

TEST(DropoutMask, ApplyScalesKeptValuesAndAddsIntoBeta) {
  const float p = 0.25f;
  const auto keys = sample_keys(7);
  const DropoutMask m{p, dropout_stream(5, 0, 0, 0), keys};
  const auto x = random_vector(kRows * kCols, 3), init = random_vector(kRows * kCols, 4);
  const auto keep = keep_of(p, m.stream, keys);
  View2<float> out = to_device(init, kRows, kCols);
  dropout_apply(m, to_device(x, kRows, kCols), out, 1.f);
  const auto added = to_host(out);
  dropout_apply(m, to_device(x, kRows, kCols), out, 0.f);
  const auto fresh = to_host(out);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = keep[i] != 0.f ? x[i] * (1.f / (1.f - p)) : 0.f;  // the kernel's own scale
    ASSERT_EQ(fresh[i], want) << i;
    ASSERT_EQ(added[i], init[i] + want) << i;
  }
}

// A bf16 step's dropout (LoRA's input, and LoRA's share of a bf16 input gradient added with beta 1):
// each element the fp32 kernel's value rounded once to nearest even.
TEST(DropoutMask, Bf16OutputsAreTheFp32ValuesRoundedOnce) {
  using testing_util::rounded_to_bf16;
  using testing_util::to_device_bf16;
  using testing_util::widened;
  const float p = 0.1f;
  const auto keys = sample_keys(11);
  const DropoutMask m{p, dropout_stream(9, 2, 1, 3), keys};
  const auto x16 = rounded_to_bf16(random_vector(kRows * kCols, 21));
  const auto x32 = random_vector(kRows * kCols, 22), init = rounded_to_bf16(random_vector(kRows * kCols, 23));
  const auto keep = keep_of(p, m.stream, keys);
  const View2<bf16> x16_dev = to_device_bf16(x16, kRows, kCols, "x16");
  const View2<bf16> fresh("fresh", kRows, kCols);
  dropout_apply(m, Unmanaged2<const bf16>(x16_dev), fresh);
  const View2<bf16> added = to_device_bf16(init, kRows, kCols, "added");
  dropout_apply(m, to_device(x32, kRows, kCols), added, 1.f);
  const auto fresh_h = widened(fresh), added_h = widened(added);
  const float scale = 1.f / (1.f - p);
  std::int64_t rounded = 0;
  for (std::size_t i = 0; i < x16.size(); ++i) {
    const float want16 = keep[i] != 0.f ? x16[i] * scale : 0.f;
    const float want32 = keep[i] != 0.f ? x32[i] * scale : 0.f;
    ASSERT_EQ(fresh_h[i], round_to_bf16(want16)) << i;
    ASSERT_EQ(added_h[i], round_to_bf16(init[i] + want32)) << i;
    rounded += fresh_h[i] != want16;
  }
  EXPECT_GT(rounded, 0);  // 1 / 0.9 is not a power of two: most products round
}

}  // namespace
}  // namespace shardft
