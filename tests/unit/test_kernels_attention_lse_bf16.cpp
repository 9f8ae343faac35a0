// Memory-efficient attention on bf16 operands (kernels/attention_lse.hpp's _bf16 entry points) against
// the fp32 tiled kernel (the one the bf16 kernels widen into on the host) on the same values: o, lse, dq, dk, dv, D bit for bit, each bf16 output the fp32 one
// rounded once (without AMX tiles; with them, within the roundings they add). Shapes with GQA groups 1, 2
// and 4, batch 2, packed samples and more than one query and key tile; backward writing its gradients over
// q, k, v themselves (the CPU step's buffers); and q, k, v as column blocks of one array.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/scoped_amx.hpp"
#include "tests/common/bf16_values.hpp"
#include "kernels/amx_attention_bf16.hpp"
#include "kernels/amx_gemm_bf16.hpp"
#include "kernels/attention_lse.hpp"

namespace shardft {
namespace {
using namespace kernel_test;
using namespace testing_util;

void expect_same_bits(const std::string& what, const std::vector<float>& got, const std::vector<float>& expected) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << what << " " << i;
}

std::vector<float> rounded(const View2<float>& x) { return rounded_to_bf16(to_host(x)); }

// The bf16 kernels' outputs and the fp32 kernel's on the same values, rounded as the bf16 ones are.
struct Outputs {
  std::vector<float> o, lse, dq, dk, dv, d;
};
struct Pair {
  Outputs bf16, fp32;
};

// Shapes with GQA groups 1, 2 and 4 over batch 2, packed samples, more than one query and key tile (of
// the tiled kernels' 64 x 128 and the AMX kernels' 64 x 64, neither dividing 150), at each head_dim.
template <class F>
void for_each_shape(F&& f, std::initializer_list<int> head_dims = {16}) {
  const int T = 150, B = 2;
  for (const int hd : head_dims) {
    for (const auto& [H, G] : {std::pair<int, int>{4, 4}, {8, 4}, {8, 2}}) {
      SCOPED_TRACE("heads " + std::to_string(H) + " kv heads " + std::to_string(G) + " head_dim " +
                   std::to_string(hd));
      f(AttentionShape{B, T, H, G, hd});
    }
  }
}

Pair run_both(const AttentionShape& s) {
  const int T = s.seq, B = s.batch, H = s.heads;
  const std::size_t N = B * T, qd = H * s.head_dim, kvd = s.kv_heads * s.head_dim;
  const auto q0 = rounded_to_bf16(random_vector(N * qd, 501)), k0 = rounded_to_bf16(random_vector(N * kvd, 502));
  const auto v0 = rounded_to_bf16(random_vector(N * kvd, 503)), do0 = rounded_to_bf16(random_vector(N * qd, 504));
  std::vector<std::int32_t> seq(N, 0);
  for (std::size_t i = T + 70; i < N; ++i) seq[i] = 1;  // the second row holds two samples
  const auto sid = to_device(seq, "seq");
  const auto q32 = to_device(q0, N, qd, "q32"), k32 = to_device(k0, N, kvd, "k32"), v32 = to_device(v0, N, kvd, "v32");
  const auto q16 = to_device_bf16(q0, N, qd, "q16"), k16 = to_device_bf16(k0, N, kvd, "k16");
  const auto v16 = to_device_bf16(v0, N, kvd, "v16"), do16 = to_device_bf16(do0, N, qd, "do16");

  Pair r;
  View2<float> o32("o32", N, qd);
  View2<bf16> o16("o16", N, qd);
  View1<float> lse32("lse32", B * H * T), lse16("lse16", B * H * T);
  // The fp32 kernel the bf16 one widens into: on the host the tiled one (the dispatcher there may take the
  // AVX-512 kernel), on a GPU the dispatcher's (the tiled kernel reads host pointers only).
  if constexpr (kComputeOnDevice) {
    attention_forward_lse(s, q32, k32, v32, sid, o32, lse32);
  } else {
    attention_forward_lse_tiled(s, q32, k32, v32, sid, o32, lse32);
  }
  attention_forward_lse_bf16(s, q16, k16, v16, sid, o16, lse16);
  // backward from the bf16 o, as a step keeps it
  const auto o_kept = to_device(widened(o16), N, qd, "o_kept");
  View2<float> dq32("dq32", N, qd), dk32("dk32", N, kvd), dv32("dv32", N, kvd);
  View1<float> d32("d32", B * H * T), d16("d16", B * H * T);
  const auto do32 = to_device(do0, N, qd, "do32");
  if constexpr (kComputeOnDevice) {
    attention_backward_lse(s, q32, k32, v32, sid, o_kept, lse32, do32, dq32, dk32, dv32, d32);
  } else {
    attention_backward_lse_tiled(s, q32, k32, v32, sid, o_kept, lse32, do32, dq32, dk32, dv32, d32);
  }
  View2<bf16> dq16("dq16", N, qd), dk16("dk16", N, kvd), dv16("dv16", N, kvd);
  attention_backward_lse_bf16(s, q16, k16, v16, sid, o16, lse16, do16, dq16, dk16, dv16, d16);
  r.bf16 = {widened(o16), to_host(lse16), widened(dq16), widened(dk16), widened(dv16), to_host(d16)};
  r.fp32 = {rounded(o32), to_host(lse32), rounded(dq32), rounded(dk32), rounded(dv32), to_host(d32)};

  // dq, dk, dv written over q, k, v: every group's operands are read before its gradients are written
  auto q_then_dq = to_device_bf16(q0, N, qd, "q_then_dq"), k_then_dk = to_device_bf16(k0, N, kvd, "k_then_dk");
  auto v_then_dv = to_device_bf16(v0, N, kvd, "v_then_dv");
  attention_backward_lse_bf16(s, q_then_dq, k_then_dk, v_then_dv, sid, o16, lse16, do16, q_then_dq, k_then_dk,
                              v_then_dv, d16);
  expect_same_bits("dq over q", widened(q_then_dq), r.bf16.dq);
  expect_same_bits("dk over k", widened(k_then_dk), r.bf16.dk);
  expect_same_bits("dv over v", widened(v_then_dv), r.bf16.dv);
  return r;
}

// Without AMX tiles (a CPU without them, or turned off) every product is sgemm's on the widened values.
TEST(KernelAttentionLseBf16, IsTheFp32KernelOnTheSameValuesRoundedOnce) {
  const ScopedAmx sgemm_only(false);
  for_each_shape([](const AttentionShape& s) {
    const Pair r = run_both(s);
    expect_same_bits("o", r.bf16.o, r.fp32.o);
    expect_same_bits("lse", r.bf16.lse, r.fp32.lse);
    expect_same_bits("dq", r.bf16.dq, r.fp32.dq);
    expect_same_bits("dk", r.bf16.dk, r.fp32.dk);
    expect_same_bits("dv", r.bf16.dv, r.fp32.dv);
    expect_same_bits("D", r.bf16.d, r.fp32.d);
  });
}

// The largest magnitude in x.
double largest(const std::vector<float>& x) {
  double m = 0.0;
  for (const float e : x) m = std::max(m, static_cast<double>(std::fabs(e)));
  return m;
}

// On AMX tiles the score products K Q^T and V dO^T sum the same exact products in another order (the fp32
// scores move by a few ulps), and the products that take P or dS take them rounded to bf16, as a GPU's
// flash kernel does: each weight of a sum moves by up to 2^-9 of itself. An output then lands within a
// bf16 rounding of the fp32 kernel's (1/128 relative) plus 2^-8 of the largest entry of its tensor (the
// roundings of a row's weights add up where its terms cancel). lse and D take no rounded weight: lse
// moves by the scores' ulps, D keeps its bits. A wrong tile (a transposed operand, a missed row, an
// unscaled dS) moves outputs by their own size. head_dim 16 runs the tiled kernels' products on the
// tiles; 32, 64 and 128 the fused AMX kernels (kernels/amx_attention_bf16.hpp).
void expect_within_bf16_rounding(const Pair& r) {
  const double ulp = 1.0 / 128, weights = 1.0 / 256;
  expect_all_near("o", r.bf16.o, r.fp32.o, ulp, weights * largest(r.fp32.o));
  expect_all_near("lse", r.bf16.lse, r.fp32.lse, 1e-6, 1e-6);
  expect_all_near("dq", r.bf16.dq, r.fp32.dq, ulp, weights * largest(r.fp32.dq));
  expect_all_near("dk", r.bf16.dk, r.fp32.dk, ulp, weights * largest(r.fp32.dk));
  expect_all_near("dv", r.bf16.dv, r.fp32.dv, ulp, weights * largest(r.fp32.dv));
}
TEST(KernelAttentionLseBf16, OnAmxTilesStaysWithinABf16RoundingOfTheFp32Kernel) {
  if (!amx::available()) GTEST_SKIP() << "no AMX here: " << amx::describe();
  EXPECT_FALSE(amx::attention_fits(16));
  EXPECT_TRUE(amx::attention_fits(64));
  for_each_shape([](const AttentionShape& s) {
    const Pair r = run_both(s);
    expect_within_bf16_rounding(r);
    expect_same_bits("D", r.bf16.d, r.fp32.d);
    EXPECT_NE(r.bf16.lse, r.fp32.lse) << "the scores did not run on the tiles";
    EXPECT_NE(r.bf16.o, r.fp32.o) << "P V did not run on the tiles";
    EXPECT_NE(r.bf16.dq, r.fp32.dq) << "dS K did not run on the tiles";
  }, {16, 32, 64, 128});
  // Sequences shorter than one tile and exactly one tile of the fused kernels.
  for (const AttentionShape& s : {AttentionShape{2, 7, 8, 2, 64}, AttentionShape{1, 64, 4, 4, 32}}) {
    SCOPED_TRACE("seq " + std::to_string(s.seq) + " head_dim " + std::to_string(s.head_dim));
    const Pair r = run_both(s);
    expect_within_bf16_rounding(r);
  }
}

// q, k, v as column blocks of one [N, q | k | v] array (the stacked projection's output, as a bf16 step
// keeps it), and dq, dk, dv written over them there: the bits of the dense operands.
TEST(KernelAttentionLseBf16, ColumnBlocksOfOneArrayGiveTheDenseBits) {
  const int T = 150, B = 2, H = 8, G = 2, hd = 16;
  const AttentionShape s{B, T, H, G, hd};
  const std::size_t N = B * T, qd = H * hd, kvd = G * hd, width = qd + 2 * kvd;
  const auto q0 = rounded_to_bf16(random_vector(N * qd, 511)), k0 = rounded_to_bf16(random_vector(N * kvd, 512));
  const auto v0 = rounded_to_bf16(random_vector(N * kvd, 513)), do0 = rounded_to_bf16(random_vector(N * qd, 514));
  std::vector<std::int32_t> seq(N, 0);
  for (std::size_t i = T + 70; i < N; ++i) seq[i] = 1;
  const auto sid = to_device(seq, "seq");
  const auto q16 = to_device_bf16(q0, N, qd, "q16"), k16 = to_device_bf16(k0, N, kvd, "k16");
  const auto v16 = to_device_bf16(v0, N, kvd, "v16"), do16 = to_device_bf16(do0, N, qd, "do16");
  View2<bf16> o16("o16", N, qd), dq16("dq16", N, qd), dk16("dk16", N, kvd), dv16("dv16", N, kvd);
  View1<float> lse16("lse16", B * H * T), d16("d16", B * H * T);
  attention_forward_lse_bf16(s, q16, k16, v16, sid, o16, lse16);
  attention_backward_lse_bf16(s, q16, k16, v16, sid, o16, lse16, do16, dq16, dk16, dv16, d16);

  auto qkv = to_device_bf16(side_by_side(q0, qd, k0, kvd, v0, kvd), N, width, "qkv");
  const Unmanaged2<bf16> all(qkv);
  const auto q = columns_of(all, 0, qd), k = columns_of(all, qd, kvd), v = columns_of(all, qd + kvd, kvd);
  View2<bf16> o("o", N, qd);
  View1<float> lse("lse", B * H * T), d("d", B * H * T);
  attention_forward_lse_bf16(s, q, k, v, sid, o, lse);
  expect_same_bits("o", widened(o), widened(o16));
  expect_same_bits("lse", to_host(lse), to_host(lse16));
  attention_backward_lse_bf16(s, q, k, v, sid, o, lse, do16, q, k, v, d);
  const auto grads = widened(qkv);
  expect_same_bits("dq", column_block(grads, width, 0, qd), widened(dq16));
  expect_same_bits("dk", column_block(grads, width, qd, kvd), widened(dk16));
  expect_same_bits("dv", column_block(grads, width, qd + kvd, kvd), widened(dv16));
  expect_same_bits("D", to_host(d), to_host(d16));
}

TEST(KernelAttentionLseBf16, ColumnsThatDoNotMatchTheShapeAreRefused) {
  const AttentionShape s{1, 4, 4, 2, 8};
  View2<bf16> q("q", 4, 32), k("k", 4, 24), v("v", 4, 16), o("o", 4, 32);
  View1<std::int32_t> sid("sid", 4);
  View1<float> lse("lse", 16);
  EXPECT_THROW(attention_forward_lse_bf16(s, q, k, v, sid, o, lse), std::invalid_argument);
}

}  // namespace
}  // namespace shardft
