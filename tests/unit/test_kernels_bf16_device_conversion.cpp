// kernels/bf16.hpp converts with the hardware's instructions inside GPU kernels (cvt.rn.bf16.f32 and a
// register move) and with integer arithmetic on the host. Both must give the same bits: a value rounded
// on the device and the same value rounded on the host feed the same step. These tests run the
// conversions inside a kernel of the default execution space and compare them with the host's, for every
// bf16 value, the ties on either side of each, and random fp32 inputs. (In a host-only build both sides
// run the host code.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/bf16.hpp"
#include "kernels/float_bits.hpp"

namespace shardft {

// out[i] = the bf16 bits of in[i], rounded inside a kernel.
void round_to_bf16_bits_in_kernel(View1<const float> in, View1<std::uint16_t> out) {
  Kokkos::parallel_for(
      "test_round_bits_in_kernel", Range(0, static_cast<std::int64_t>(in.extent(0))),
      KOKKOS_LAMBDA(const std::int64_t i) { out(i) = bf16::round_bits(in(i)); });
  Kokkos::fence();
}

// out[i] = bits[i] widened to fp32 inside a kernel.
void widen_bf16_bits_in_kernel(View1<const std::uint16_t> bits, View1<float> out) {
  Kokkos::parallel_for(
      "test_widen_bits_in_kernel", Range(0, static_cast<std::int64_t>(bits.extent(0))),
      KOKKOS_LAMBDA(const std::int64_t i) { out(i) = bf16::to_float(bits(i)); });
  Kokkos::fence();
}

namespace {
using namespace kernel_test;

TEST(KernelBf16DeviceConversion, RoundingInAKernelIsTheHostRoundingBitForBit) {
  std::vector<float> in;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {  // every bf16 value, its ties and their neighbours
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      in.push_back(bits_to_float((b << 16) | low));
    }
  }
  std::mt19937 gen(163);
  for (int i = 0; i < 100000; ++i) in.push_back(bits_to_float(static_cast<std::uint32_t>(gen())));
  View1<std::uint16_t> out("rounded", in.size());
  round_to_bf16_bits_in_kernel(to_device(in, "in"), out);
  const std::vector<std::uint16_t> got = to_host(out);
  int mismatches = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint16_t want = bf16::round_bits(in[i]);
    // A NaN stays a NaN; its payload and sign may differ (the hardware returns the canonical NaN).
    const bool same = std::isnan(in[i]) ? std::isnan(bf16::to_float(got[i])) : got[i] == want;
    if (!same && mismatches++ < 5) {
      ADD_FAILURE() << std::hex << "input 0x" << float_to_bits(in[i]) << ": kernel 0x" << got[i] << ", host 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// The host's rounding against the definition: of the two bf16 values around x (truncated, and one unit
// further from zero; past the largest finite value, infinity), the nearer, the even one on a tie; a NaN
// keeps its sign and payload's top bits and comes back quiet.
TEST(KernelBf16DeviceConversion, HostRoundingIsNearestEvenAndKeepsANaNQuiet) {
  int mismatches = 0;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    for (const std::uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const std::uint32_t u = (b << 16) | low;
      const float x = bits_to_float(u);
      std::uint16_t want = 0;
      if (std::isnan(x)) {
        want = static_cast<std::uint16_t>((u >> 16) | 0x40u);
      } else if (std::isinf(x)) {
        want = static_cast<std::uint16_t>(u >> 16);
      } else {
        const std::uint32_t down = u >> 16, up = down + 1;  // up of the largest finite value is infinity
        const double vd = std::fabs(static_cast<double>(bits_to_float(down << 16)));
        const double vu = (up & 0x7fffu) == 0x7f80u ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(bits_to_float(up << 16)));
        const double ax = std::fabs(static_cast<double>(x));
        want = static_cast<std::uint16_t>(ax - vd < vu - ax ? down : vu - ax < ax - vd ? up : (down % 2 == 0 ? down : up));
      }
      const std::uint16_t got = bf16::round_bits(x);
      if (got != want && mismatches++ < 5) ADD_FAILURE() << std::hex << "input 0x" << u << ": 0x" << got << ", want 0x" << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(KernelBf16DeviceConversion, WideningInAKernelIsTheHostWideningBitForBit) {
  std::vector<std::uint16_t> bits(0x10000);
  for (std::uint32_t b = 0; b < 0x10000u; ++b) bits[b] = static_cast<std::uint16_t>(b);
  View1<float> out("widened", bits.size());
  widen_bf16_bits_in_kernel(to_device(bits, "bits"), out);
  const std::vector<float> got = to_host(out);
  int mismatches = 0;
  for (std::uint32_t b = 0; b < 0x10000u; ++b) {
    if (float_to_bits(got[b]) != b << 16 && mismatches++ < 5) {
      ADD_FAILURE() << std::hex << "bf16 0x" << b << ": kernel 0x" << float_to_bits(got[b]) << ", want 0x" << (b << 16);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace shardft
