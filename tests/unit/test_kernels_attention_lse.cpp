// The memory-efficient attention (log-sum-exp saved, scores recomputed) against the exact kernel
// that stores the probabilities: same output and the same dq, dk, dv, with grouped-query heads and
// packed samples; and its own backward against finite differences of its own forward.
// The tiled (FlashAttention-2, sgemm) kernel, the fused AVX-512 kernel and the Kokkos-team flash kernel
// against the scalar reference kernel over shapes that reach every tile edge case: T not a multiple of the
// tile, several tiles, sample boundaries inside tiles, GQA groups 1 / 2 / 4, batch > 1, head_dim 32 and 64,
// square and non-square tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/common/relative_difference.hpp"
#include "finite_difference.hpp"
#include "kernels/attention_flash.hpp"
#include "kernels/attention_lse.hpp"

namespace shardft {
namespace {
using testing_util::rel_diff;
using namespace kernel_test;

TEST(KernelAttentionLse, MatchesTheExactKernelForwardAndBackward) {
  const AttentionShape s{2, 9, 4, 2, 8};
  const std::size_t N = 2 * 9, qd = 4 * 8, kvd = 2 * 8;
  auto q = to_device(random_vector(N * qd, 1), N, qd), k = to_device(random_vector(N * kvd, 2), N, kvd),
       v = to_device(random_vector(N * kvd, 3), N, kvd), dout = to_device(random_vector(N * qd, 4), N, qd);
  // row 0: one sample; row 1: three packed samples
  auto seq = to_device(std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2});
  View2<float> o_exact("o", N, qd), o_lse("o", N, qd);
  View1<float> probs("p", s.probs_size()), lse("lse", 2 * 4 * 9), scratch("ds", s.probs_size()), delta("d", 2 * 4 * 9);
  attention_forward(s, q, k, v, seq, o_exact, probs);
  attention_forward_lse(s, q, k, v, seq, o_lse, lse);
  EXPECT_LT(rel_diff(to_host(o_lse), to_host(o_exact)), 1e-6);

  View2<float> dq1("dq", N, qd), dk1("dk", N, kvd), dv1("dv", N, kvd), dq2("dq", N, qd), dk2("dk", N, kvd), dv2("dv", N, kvd);
  attention_backward(s, q, k, v, probs, dout, dq1, dk1, dv1, scratch);
  attention_backward_lse(s, q, k, v, seq, o_lse, lse, dout, dq2, dk2, dv2, delta);
  EXPECT_LT(rel_diff(to_host(dq2), to_host(dq1)), 1e-5);
  EXPECT_LT(rel_diff(to_host(dk2), to_host(dk1)), 1e-5);
  EXPECT_LT(rel_diff(to_host(dv2), to_host(dv1)), 1e-5);
}

// seq_ids of one row of T tokens: sample k covers [starts[k], starts[k+1]).
std::vector<std::int32_t> packed_row(int T, const std::vector<int>& starts) {
  std::vector<std::int32_t> ids(T, 0);
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const int end = k + 1 < starts.size() ? starts[k + 1] : T;
    for (int t = starts[k]; t < end; ++t) ids[t] = static_cast<std::int32_t>(k);
  }
  return ids;
}

struct TiledCase {
  std::string name;
  AttentionShape s;
  AttentionTiles tiles;
  std::vector<std::int32_t> seq_ids;  // B*T
};

struct LseResult {
  std::vector<float> o, lse, dq, dk, dv;
};

// Forward and backward of one kernel pair on the case's data (the same random inputs for both).
template <class Fwd, class Bwd>
LseResult run_lse(const TiledCase& c, Fwd fwd, Bwd bwd) {
  const AttentionShape& s = c.s;
  const std::size_t N = static_cast<std::size_t>(s.batch) * s.seq, qd = s.heads * s.head_dim,
                    kvd = s.kv_heads * s.head_dim, rows = N * s.heads;
  auto q = to_device(random_vector(N * qd, 21, -2.f, 2.f), N, qd), k = to_device(random_vector(N * kvd, 22, -2.f, 2.f), N, kvd),
       v = to_device(random_vector(N * kvd, 23), N, kvd), dout = to_device(random_vector(N * qd, 24), N, qd);
  auto seq = to_device(c.seq_ids);
  View2<float> o("o", N, qd), dq("dq", N, qd), dk("dk", N, kvd), dv("dv", N, kvd);
  View1<float> lse("lse", rows), delta("delta", rows);
  Kokkos::deep_copy(dq, 7.f);  // the kernels overwrite their outputs
  Kokkos::deep_copy(dk, 7.f);
  Kokkos::deep_copy(dv, 7.f);
  fwd(s, q, k, v, seq, o, lse);
  bwd(s, q, k, v, seq, o, lse, dout, dq, dk, dv, delta);
  return {to_host(o), to_host(lse), to_host(dq), to_host(dk), to_host(dv)};
}

std::vector<TiledCase> tiled_cases() {
  std::vector<TiledCase> cases;
  auto rows = [](std::initializer_list<std::vector<std::int32_t>> rs) {
    std::vector<std::int32_t> all;
    for (const auto& r : rs) all.insert(all.end(), r.begin(), r.end());
    return all;
  };
  // Default 64 x 64 tiles: T 150 (two full tiles and a partial one), the second row packed with
  // boundaries inside tiles and one across a tile edge; H 8 / G 4 (group 2), hd 64.
  cases.push_back({"T150_H8_G4_hd64_default_tiles", {2, 150, 8, 4, 64}, {},
                   rows({packed_row(150, {0}), packed_row(150, {0, 37, 64, 69, 100, 149})})});
  // Group 4 (H 4 / G 1), hd 32, T 200, packed with a one-token sample at the start.
  cases.push_back({"T200_H4_G1_hd32_default_tiles", {1, 200, 4, 1, 32}, {}, packed_row(200, {0, 1, 10, 70, 130})});
  // T an exact multiple of the tile, group 1.
  cases.push_back({"T128_H2_G2_hd64_default_tiles", {1, 128, 2, 2, 64}, {}, packed_row(128, {0})});
  // Small non-square tiles, batch 3, many tiles per row, group 1 and 2.
  cases.push_back({"T45_H2_G2_hd32_tiles8x16", {3, 45, 2, 2, 32}, {8, 16},
                   rows({packed_row(45, {0}), packed_row(45, {0, 5, 17, 30}), packed_row(45, {0, 44})})});
  cases.push_back({"T77_H4_G2_hd64_tiles16x8", {2, 77, 4, 2, 64}, {16, 8},
                   rows({packed_row(77, {0, 3, 40, 41}), packed_row(77, {0})})});
  // Group 4 with 32 x 48 tiles over T 131.
  cases.push_back({"T131_H8_G2_hd32_tiles32x48", {1, 131, 8, 2, 32}, {32, 48}, packed_row(131, {0, 50, 96})});
  // seq ids that are not runs of increasing values (only equality counts), 8 x 8 tiles.
  std::vector<std::int32_t> odd(40);
  for (int t = 0; t < 40; ++t) odd[t] = (t / 3) % 4 == 1 ? 5 : t % 7 == 0 ? 2 : 0;
  cases.push_back({"T40_H4_G2_hd32_tiles8x8_interleaved_ids", {1, 40, 4, 2, 32}, {8, 8}, odd});
  // Tiles larger than the sequence, and 1 x 1 tiles.
  cases.push_back({"T20_H2_G1_hd32_tiles128", {2, 20, 2, 1, 32}, {128, 128},
                   rows({packed_row(20, {0, 9}), packed_row(20, {0})})});
  cases.push_back({"T12_H2_G1_hd32_tiles1x1", {1, 12, 2, 1, 32}, {1, 1}, packed_row(12, {0, 4})});
  return cases;
}

void expect_matches_reference(const LseResult& got, const LseResult& ref) {
  EXPECT_LT(rel_diff(got.o, ref.o), 1e-5) << "o";
  EXPECT_LT(rel_diff(got.lse, ref.lse), 1e-5) << "lse";
  EXPECT_LT(rel_diff(got.dq, ref.dq), 1e-5) << "dq";
  EXPECT_LT(rel_diff(got.dk, ref.dk), 1e-5) << "dk";
  EXPECT_LT(rel_diff(got.dv, ref.dv), 1e-5) << "dv";
  double max_lse = 0.0;
  for (std::size_t i = 0; i < ref.lse.size(); ++i) max_lse = std::max(max_lse, std::fabs(double(got.lse[i]) - ref.lse[i]));
  EXPECT_LT(max_lse, 1e-5);
}

TEST(KernelAttentionLse, TiledMatchesTheReferenceKernel) {
  if constexpr (!Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    GTEST_SKIP() << "the tiled kernel calls BLAS on host pointers; this build's memory space is not host-accessible";
  } else {
    for (const TiledCase& c : tiled_cases()) {
      SCOPED_TRACE(c.name);
      ASSERT_EQ(c.seq_ids.size(), static_cast<std::size_t>(c.s.batch) * c.s.seq);
      const LseResult ref = run_lse(c, attention_forward_lse_reference, attention_backward_lse_reference);
      const AttentionTiles tiles = c.tiles;
      const LseResult tiled = run_lse(
          c,
          [tiles](auto&&... a) { attention_forward_lse_tiled(a..., tiles); },
          [tiles](auto&&... a) { attention_backward_lse_tiled(a..., tiles); });
      expect_matches_reference(tiled, ref);
    }
  }
}

// The flash kernel on the same cases: the small explicit tiles where they fit a team's scratch (8 x 16,
// 16 x 8, 8 x 8, 1 x 1, 32 x 16), the tiles it picks itself for the rest; and head_dim 16 / 128 with
// picked tiles, where one query tile spans several samples.
TEST(KernelAttentionLse, FlashMatchesTheReferenceKernel) {
  std::vector<TiledCase> cases = tiled_cases();
  for (TiledCase& c : cases) {
    const bool small = c.tiles.query_rows <= 32 && c.tiles.key_cols <= 48;
    c.tiles = small ? AttentionTiles{c.tiles.query_rows, std::min(c.tiles.key_cols, 16)} : AttentionTiles{0, 0};
  }
  cases.push_back({"T100_H4_G2_hd128_picked_tiles", {2, 100, 4, 2, 128}, {0, 0},
                   [] {
                     auto a = packed_row(100, {0, 30, 31, 90});
                     auto b = packed_row(100, {0});
                     a.insert(a.end(), b.begin(), b.end());
                     return a;
                   }()});
  cases.push_back({"T70_H6_G3_hd16_picked_tiles", {1, 70, 6, 3, 16}, {0, 0}, packed_row(70, {0, 2, 65})});
  for (const TiledCase& c : cases) {
    SCOPED_TRACE(c.name);
    const LseResult ref = run_lse(c, attention_forward_lse_reference, attention_backward_lse_reference);
    // Several threads per team where the execution space has them (OpenMP), so the team barriers and
    // the split of each tile across threads are exercised, not only one thread per team.
    const FlashTiles tiles{c.tiles.query_rows, c.tiles.key_cols, std::min(4, ExecSpace().concurrency())};
    const LseResult flash = run_lse(
        c,
        [tiles](auto&&... a) { attention_forward_lse_flash(a..., tiles); },
        [tiles](auto&&... a) { attention_backward_lse_flash(a..., tiles); });
    expect_matches_reference(flash, ref);
  }
}

// Tiles it picks fit the team scratch of a CUDA block without opt-in, and shrink as head_dim grows;
// tiles that do not fit are refused with the sizes named, not run past the scratch.
TEST(KernelAttentionLse, FlashTilesFitTheTeamScratch) {
  const FlashTilePlan p64 = flash_tile_plan(64), p128 = flash_tile_plan(128);
  EXPECT_GE(p64.forward.query_rows, 16);
  EXPECT_GE(p64.forward.query_rows, p128.forward.query_rows);
  EXPECT_GE(p64.dkv.key_cols, p128.dkv.key_cols);
  EXPECT_GE(p128.dq.query_rows, 8);
  const AttentionShape s{1, 8, 1, 1, 256};
  View2<float> q("q", 8, 256), o("o", 8, 256);
  View1<float> lse("lse", 8);
  View1<std::int32_t> seq("seq", 8);
  try {
    attention_forward_lse_flash(s, q, q, q, seq, o, lse, FlashTiles{128, 128});
    FAIL() << "128 x 128 tiles at head_dim 256 were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("128 x 128"), std::string::npos) << e.what();
  }
}

// The fused AVX-512 kernel (the fp32 step's on a CPU with AVX-512F) over the tiled kernel's cases (its own
// 64 x 64 tiles whatever they ask for: T 150 and 131 end in a partial tile, T 12 to 45 fit in one, sample
// boundaries inside and across tiles, groups 1 / 2 / 4), and head_dim 16, 48, 128 and 256: one, three,
// eight and sixteen vectors of a row, in strips of four and what is left.
TEST(KernelAttentionLse, Avx512MatchesTheReferenceKernel) {
  if (!Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    GTEST_SKIP() << "the AVX-512 kernel works on host pointers; this build's memory space is not host-accessible";
  }
  if (!attention_lse_avx512_fits({1, 8, 1, 1, 64})) {
    GTEST_SKIP() << "this build or CPU has no AVX-512 attention kernel (AVX-512F)";
  }
  std::vector<TiledCase> cases = tiled_cases();
  cases.push_back({"T70_H6_G3_hd16", {1, 70, 6, 3, 16}, {}, packed_row(70, {0, 2, 65})});
  cases.push_back({"T90_H4_G2_hd48", {2, 90, 4, 2, 48}, {}, std::vector<std::int32_t>(180, 0)});
  cases.push_back({"T100_H4_G2_hd128", {1, 100, 4, 2, 128}, {}, packed_row(100, {0, 64})});
  cases.push_back({"T66_H2_G1_hd256", {1, 66, 2, 1, 256}, {}, packed_row(66, {0})});
  for (const TiledCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(attention_lse_avx512_fits(c.s));
    const LseResult ref = run_lse(c, attention_forward_lse_reference, attention_backward_lse_reference);
    const LseResult got = run_lse(c, attention_forward_lse_avx512, attention_backward_lse_avx512);
    expect_matches_reference(got, ref);
  }
}

// The dispatcher runs a host kernel on a host build (the AVX-512 one where it fits, else the tiled one),
// the flash kernel elsewhere: either way it matches the reference, and a host build's output is its host
// kernel's bit for bit.
TEST(KernelAttentionLse, DispatcherMatchesTheKernelOfItsMemorySpace) {
  const TiledCase c{"T150", {2, 150, 8, 4, 64}, {}, std::vector<std::int32_t>(300, 0)};
  const LseResult ref = run_lse(c, attention_forward_lse_reference, attention_backward_lse_reference);
  const LseResult got = run_lse(c, attention_forward_lse, attention_backward_lse);
  EXPECT_LT(rel_diff(got.o, ref.o), 1e-5);
  EXPECT_LT(rel_diff(got.dq, ref.dq), 1e-5);
  EXPECT_LT(rel_diff(got.dk, ref.dk), 1e-5);
  EXPECT_LT(rel_diff(got.dv, ref.dv), 1e-5);
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    const LseResult host = attention_lse_avx512_fits(c.s)
                               ? run_lse(c, attention_forward_lse_avx512, attention_backward_lse_avx512)
                               : run_lse(
                                     c, [](auto&&... a) { attention_forward_lse_tiled(a...); },
                                     [](auto&&... a) { attention_backward_lse_tiled(a...); });
    EXPECT_EQ(got.o, host.o);
    EXPECT_EQ(got.dk, host.dk);
  }
}

TEST(KernelAttentionLse, BackwardMatchesFiniteDifferencesOfItsForward) {
  const AttentionShape s{1, 6, 2, 1, 4};
  const std::size_t N = 6, qd = 8, kvd = 4;
  const auto q0 = random_vector(N * qd, 11), k0 = random_vector(N * kvd, 12), v0 = random_vector(N * kvd, 13);
  const auto r = random_vector(N * qd, 14);  // loss = sum(o * r)
  auto seq = to_device(std::vector<std::int32_t>{0, 0, 0, 1, 1, 1});
  auto loss_of = [&](const std::vector<float>& qh, const std::vector<float>& kh, const std::vector<float>& vh) {
    View2<float> o("o", N, qd);
    View1<float> lse("lse", 2 * 6);
    attention_forward_lse(s, to_device(qh, N, qd), to_device(kh, N, kvd), to_device(vh, N, kvd), seq, o, lse);
    return weighted_sum(to_host(o), r);
  };
  View2<float> o("o", N, qd), dq("dq", N, qd), dk("dk", N, kvd), dv("dv", N, kvd);
  View1<float> lse("lse", 12), delta("d", 12);
  auto qd_ = to_device(q0, N, qd), kd_ = to_device(k0, N, kvd), vd_ = to_device(v0, N, kvd);
  attention_forward_lse(s, qd_, kd_, vd_, seq, o, lse);
  attention_backward_lse(s, qd_, kd_, vd_, seq, o, lse, to_device(r, N, qd), dq, dk, dv, delta);
  expect_gradient_close("dq", to_host(dq), numeric_gradient(q0, [&](const std::vector<float>& x) { return loss_of(x, k0, v0); }, 1e-2f));
  expect_gradient_close("dk", to_host(dk), numeric_gradient(k0, [&](const std::vector<float>& x) { return loss_of(q0, x, v0); }, 1e-2f));
  expect_gradient_close("dv", to_host(dv), numeric_gradient(v0, [&](const std::vector<float>& x) { return loss_of(q0, k0, x); }, 1e-2f));
}

}  // namespace
}  // namespace shardft
