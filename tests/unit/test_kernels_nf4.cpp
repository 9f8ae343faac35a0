// NF4 quantization (kernels/nf4_quantize.hpp) against bitsandbytes' stored bytes for a fixed tensor
// (tests/reference/nf4/, made by tests/reference/make_nf4_fixture.py with bitsandbytes 0.50.2), and on
// random tensors against a brute-force nearest-code search written here, the error bound, odd sizes
// and the refusal of non-finite input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/nf4_quantize.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

template <class T>
Unmanaged1<const T> cv(const View1<T>& v) { return Unmanaged1<const T>(v.data(), v.extent(0)); }
template <class T>
Unmanaged1<T> mv(const View1<T>& v) { return Unmanaged1<T>(v.data(), v.extent(0)); }

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

template <class T>
std::vector<T> read_raw(const std::string& name) {
  const std::string path = std::string(SHARDFT_REFERENCE_DIR) + "/nf4/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

struct Nf4Fixture {
  nlohmann::json meta;
  std::vector<float> input, absmax2, code2, dequant;
  std::vector<std::uint8_t> packed, absmax_q;
  float offset = 0.f;
  static Nf4Fixture load() {
    Nf4Fixture f;
    std::ifstream in(std::string(SHARDFT_REFERENCE_DIR) + "/nf4/meta.json");
    f.meta = nlohmann::json::parse(in);
    f.input = read_raw<float>("input.f32");
    f.absmax2 = read_raw<float>("absmax2.f32");
    f.code2 = read_raw<float>("code2.f32");
    f.dequant = read_raw<float>("dequant.f32");
    f.packed = read_raw<std::uint8_t>("packed.u8");
    f.absmax_q = read_raw<std::uint8_t>("absmax_q.u8");
    const std::uint32_t ob = f.meta.at("offset_bits").get<std::uint32_t>();
    std::memcpy(&f.offset, &ob, 4);
    return f;
  }
};

template <class T>
std::int64_t count_different(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return -1;
  std::int64_t d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return d;
}

TEST(KernelsNf4, CodeTablesEqualBitsandbytes) {
  const auto fx = Nf4Fixture::load();
  const auto& map = dynamic_map_signed();
  ASSERT_EQ(fx.code2.size(), 256u);
  EXPECT_EQ(count_different(std::vector<float>(map.begin(), map.end()), fx.code2), 0);
  EXPECT_EQ(nf4_code()[0], -1.f);
  EXPECT_EQ(nf4_code()[7], 0.f);
  EXPECT_EQ(nf4_code()[15], 1.f);
}

TEST(KernelsNf4, QuantizeEqualsBitsandbytesByteForByte) {
  const auto fx = Nf4Fixture::load();
  const std::vector<std::int64_t> shape = fx.meta.at("shape").get<std::vector<std::int64_t>>();
  auto x = to_device(fx.input, "x");
  const Nf4Tensor q = nf4_quantize(cv(x), shape, "fixture");
  EXPECT_EQ(q.numel, 16999);
  EXPECT_EQ(count_different(to_host(q.packed), fx.packed), 0);
  // Our offset is the correctly rounded mean; torch's fp32 mean (in the fixture) is an ulp away.
  EXPECT_EQ(bits_of(q.offset), fx.meta.at("offset_double_mean_bits").get<std::uint32_t>());
  EXPECT_LE(std::abs(static_cast<std::int64_t>(bits_of(q.offset)) - static_cast<std::int64_t>(bits_of(fx.offset))), 1);

  // Second level from bitsandbytes' offset: absmax2 and every 8-bit absmax byte equal.
  View1<std::uint8_t> packed("packed", nf4_packed_bytes(q.numel)), absmax_q("absmax_q", nf4_blocks(q.numel));
  View1<float> absmax("absmax", nf4_blocks(q.numel)), absmax2("absmax2", nf4_absmax_blocks(q.numel));
  ASSERT_EQ(nf4_quantize_blocks(cv(x), mv(packed), mv(absmax)), 0);
  nf4_quantize_absmax(cv(absmax), fx.offset, mv(absmax_q), mv(absmax2));
  EXPECT_EQ(count_different(to_host(absmax_q), fx.absmax_q), 0);
  EXPECT_EQ(count_different(to_host(absmax2), fx.absmax2), 0);
  // With our own offset the stored absmax may move by one map entry at most, in few blocks.
  const auto own_q = to_host(q.absmax_q);
  std::int64_t moved = 0;
  for (std::size_t k = 0; k < own_q.size(); ++k) {
    EXPECT_LE(std::abs(int(own_q[k]) - int(fx.absmax_q[k])), 1) << "block " << k;
    moved += own_q[k] != fx.absmax_q[k];
  }
  EXPECT_LE(moved, 5);
}

Nf4Tensor fixture_tensor(const Nf4Fixture& fx) {
  Nf4Tensor q;
  q.shape = fx.meta.at("shape").get<std::vector<std::int64_t>>();
  q.numel = static_cast<std::int64_t>(fx.input.size());
  q.packed = to_device(fx.packed, "packed");
  q.absmax_q = to_device(fx.absmax_q, "absmax_q");
  q.absmax2 = to_device(fx.absmax2, "absmax2");
  q.offset = fx.offset;
  return q;
}

TEST(KernelsNf4, DequantizeEqualsBitsandbytesExactly) {
  const auto fx = Nf4Fixture::load();
  const Nf4Tensor q = fixture_tensor(fx);
  View1<float> y("y", q.numel);
  Kokkos::deep_copy(y, 12345.f);
  nf4_dequantize(q, mv(y));
  EXPECT_EQ(count_different(to_host(y), fx.dequant), 0);

  View1<bf16> yb("yb", q.numel);
  nf4_dequantize(q, mv(yb));
  const auto got = to_host(yb);
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i].bits != bf16::round_bits(fx.dequant[i]);
  EXPECT_EQ(wrong, 0);
  View1<float> short_dst("short", q.numel - 1);
  EXPECT_THROW(nf4_dequantize(q, mv(short_dst)), std::invalid_argument);
}

// Brute force: index of the nearest code value (first one on an exact tie, which random data never hits).
int nearest(const float* code, int count, float x) {
  int best = 0;
  for (int c = 1; c < count; ++c) {
    if (std::abs(code[c] - x) < std::abs(code[best] - x)) best = c;
  }
  return best;
}

// Quantizes random data of n values and checks every byte against the brute-force nearest code,
// the padding nibble, the array sizes and the per-block error bound of dequantize.
void check_random(std::int64_t n, std::uint32_t seed) {
  SCOPED_TRACE("n = " + std::to_string(n));
  std::vector<float> x = random_vector(static_cast<std::size_t>(n), seed, -1.f, 1.f);
  std::mt19937 rng(seed);
  for (std::int64_t k = 0; k < nf4_blocks(n); ++k) {  // block scales spread over 4 decades
    const float s = std::pow(10.f, -3.f + 4.f * std::uniform_real_distribution<float>(0.f, 1.f)(rng));
    for (std::int64_t i = k * 64; i < std::min(n, (k + 1) * 64); ++i) x[i] *= s;
  }
  auto dx = to_device(x, "x");
  const Nf4Tensor q = nf4_quantize(cv(dx), {n}, "random");
  ASSERT_EQ(static_cast<std::int64_t>(q.packed.extent(0)), (n + 1) / 2);
  ASSERT_EQ(static_cast<std::int64_t>(q.absmax_q.extent(0)), (n + 63) / 64);
  ASSERT_EQ(static_cast<std::int64_t>(q.absmax2.extent(0)), ((n + 63) / 64 + 255) / 256);
  const auto packed = to_host(q.packed), aq = to_host(q.absmax_q);
  const auto a2 = to_host(q.absmax2);
  const auto& nf4 = nf4_code();
  const auto& dyn = dynamic_map_signed();
  std::vector<float> absmax(aq.size(), 0.f);
  for (std::int64_t i = 0; i < n; ++i) absmax[i / 64] = std::max(absmax[i / 64], std::abs(x[i]));
  std::int64_t wrong_nf4 = 0, wrong_dyn = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const int idx = i % 2 == 0 ? packed[i / 2] >> 4 : packed[i / 2] & 15;
    wrong_nf4 += idx != nearest(nf4.data(), 16, x[i] * (1.f / absmax[i / 64]));
  }
  if (n % 2) {
    EXPECT_EQ(packed.back() & 15, 7) << "odd n pads with the index of 0";
  }
  for (std::size_t k = 0; k < aq.size(); ++k) {
    wrong_dyn += aq[k] != nearest(dyn.data(), 256, (absmax[k] - q.offset) * (1.f / a2[k / 256]));
  }
  EXPECT_EQ(wrong_nf4, 0);
  EXPECT_EQ(wrong_dyn, 0);

  float nf4_gap = 0.f, dyn_gap = 0.f;
  for (int c = 1; c < 16; ++c) nf4_gap = std::max(nf4_gap, nf4[c] - nf4[c - 1]);
  for (int c = 1; c < 256; ++c) dyn_gap = std::max(dyn_gap, dyn[c] - dyn[c - 1]);
  View1<float> y("y", n);
  nf4_dequantize(q, mv(y));
  const auto yh = to_host(y);
  double worst = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = i / 64;
    // |x - nf4[idx] * absmax| <= absmax * gap / 2, plus |absmax - scale| <= absmax2 * dyn_gap / 2 from the
    // double quantization, plus fp32 rounding.
    const double bound = absmax[k] * nf4_gap / 2 + a2[k / 256] * dyn_gap / 2 + 1e-6 * absmax[k];
    worst = std::max(worst, std::abs(double(x[i]) - yh[i]) / bound);
  }
  EXPECT_LE(worst, 1.0);
  if (n >= 64) {
    EXPECT_GT(worst, 0.2) << "the bound should not be vacuous";
  }
}

TEST(KernelsNf4, RandomTensorsMatchNearestCodeAndErrorBound) {
  check_random(64 * 256 * 3 + 64 * 7 + 5, 11);  // three full absmax blocks and a partial one, odd n
  check_random(4096, 12);
}

TEST(KernelsNf4, OddSizes) {
  for (const std::int64_t n : {1, 2, 63, 65, 127, 64 * 256, 64 * 256 + 1}) check_random(n, static_cast<std::uint32_t>(n));
}

TEST(KernelsNf4, AllZeroBlockStoresIndexZeroAndDequantizesToZero) {
  std::vector<float> x(200, 0.f);
  for (int i = 64; i < 128; ++i) x[i] = 0.01f * static_cast<float>(i - 90);
  auto dx = to_device(x, "x");
  const Nf4Tensor q = nf4_quantize(cv(dx), {200}, "zeros");
  const auto packed = to_host(q.packed);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(packed[j], 0) << "byte " << j << ": CUDA's 0 * (1/0) = NaN gives index 0";
  EXPECT_EQ(packed[45] >> 4, 7) << "a zero in a non-zero block is index 7";
  // Index 0 is -1 * scale, and the double-quantized scale of an absmax of 0 is 0 up to its error.
  const auto a2 = to_host(q.absmax2);
  const auto& dyn = dynamic_map_signed();
  float dyn_gap = 0.f;
  for (int c = 1; c < 256; ++c) dyn_gap = std::max(dyn_gap, dyn[c] - dyn[c - 1]);
  View1<float> y("y", 200);
  nf4_dequantize(q, mv(y));
  const auto yh = to_host(y);
  for (int i = 0; i < 64; ++i) EXPECT_LE(std::abs(yh[i]), a2[0] * dyn_gap / 2) << i;
}

TEST(KernelsNf4, RefusesNonFiniteInput) {
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = random_vector(300, 5);
    x[137] = bad;
    auto dx = to_device(x, "x");
    try {
      nf4_quantize(cv(dx), {3, 100}, "layers.0.q_proj.weight");
      ADD_FAILURE() << "non-finite input was quantized";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("layers.0.q_proj.weight"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("1 of 300 values are NaN or Inf"), std::string::npos) << e.what();
    }
  }
  auto dx = to_device(random_vector(300, 5), "x");
  EXPECT_THROW(nf4_quantize(cv(dx), {3, 99}, "w"), std::invalid_argument);
}

TEST(KernelsNf4, StorageBytes) {
  const std::int64_t n = 4096LL * 4096;
  const double per_param = static_cast<double>(nf4_storage_bytes(n)) / static_cast<double>(n);
  EXPECT_NEAR(per_param, 0.5 + 1.0 / 64 + 4.0 / (64 * 256), 1e-6);
  auto dx = to_device(random_vector(1000, 3), "x");
  const Nf4Tensor q = nf4_quantize(cv(dx), {10, 100}, "w");
  EXPECT_EQ(q.storage_bytes(), static_cast<std::int64_t>(q.packed.extent(0) + q.absmax_q.extent(0) +
                                                         4 * q.absmax2.extent(0) + sizeof(float)));
}

}  // namespace
}  // namespace shardft
