// The one-launch optimizer over a whole shard (adamw_update_runs) against what it replaces, bit for bit:
// one adamw_update per parameter run with its own weight decay, and before it clip_to_norm's pass over
// the gradient. Runs of mixed decay, with gaps (padding the kernel must not touch), runs much shorter
// than a chunk and runs across chunk edges. Also the run table itself, the one-launch compute-weight
// refresh (cast_runs) against the per-piece conversions, and the update that writes the refresh as it
// goes against the update followed by the refresh.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <stdexcept>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/device_build.hpp"
#include "kernels/adamw.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/fp16.hpp"
#include "kernels/runs_cast.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// Bit for bit on the host backends. On a GPU nvcc contracts a*b+c into FMAs kernel by kernel, so the one
// launch and the per-run launches (the same expression in two kernels) may differ in the last bits of the
// terms: there an element is held to 8 float ulps of its own size plus of a hundredth of the buffer's
// largest (AdamW's update is a difference of terms, so its result can be far smaller than they are;
// measured on an H200: 6 ulps of an element of 8e-4). Equal infinities and NaNs pass as equal.
template <class T>
void expect_bitwise_equal(const char* what, const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size()) << what;
  float scale = 0.f;
  if constexpr (std::is_same<T, float>::value) {
    for (const float v : b) scale = std::isfinite(v) ? std::max(scale, std::abs(v)) : scale;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_same<T, float>::value) {
      if (testing_util::kComputeOnDevice) {
        if (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))) continue;
        ASSERT_LE(std::abs(a[i] - b[i]), 8 * std::numeric_limits<float>::epsilon() * (std::abs(b[i]) + 1e-2f * scale))
            << what << " element " << i << ": " << a[i] << " vs " << b[i];
        continue;
      }
    }
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(T)), 0) << what << " element " << i;
  }
}

// A shard shaped like a model's: per "layer" a norm (no decay), four matrices, a norm, three matrices
// (decay), with padding gaps; small runs inside one chunk and large ones across several chunk edges.
std::vector<FlatRun> model_like_runs(std::int64_t* total) {
  std::vector<FlatRun> runs;
  std::int64_t at = 0;
  auto add = [&](std::int64_t n, bool decay) {
    runs.push_back({at, n, decay ? 1 : 0});
    at += n;
  };
  add(3 * kRunChunk + 5, true);  // embedding
  for (int layer = 0; layer < 3; ++layer) {
    add(48, false);
    for (int k = 0; k < 4; ++k) add(700 + 97 * k, true);
    add(48, false);
    add(2 * kRunChunk - 3, true);
    add(11, true);  // same decay as the one before: merged into one run
    add(kRunChunk + 1, true);
    at += 13;  // unit padding: in no run
  }
  add(48, false);
  at += 7;
  *total = at;
  return runs;
}

struct State {
  View1<float> p, m, v, g;
};

State make_state(std::int64_t n, unsigned seed) {
  State s{to_device(random_vector(n, seed), "p"), to_device(random_vector(n, seed + 1, 0.f, 1e-3f), "m"),
          to_device(random_vector(n, seed + 2, 0.f, 1e-6f), "v"), to_device(random_vector(n, seed + 3), "g")};
  return s;
}

Unmanaged1<float> piece(const View1<float>& v, const FlatRun& r) { return Unmanaged1<float>(v.data() + r.begin, r.length); }

// What the one launch replaces: one adamw_update per run, with the run's weight decay.
void per_run_adamw(const AdamWHyper& h, const std::vector<FlatRun>& runs, State& s) {
  for (const FlatRun& r : runs) {
    AdamWHyper hr = h;
    hr.weight_decay = r.value ? h.weight_decay : 0.f;
    adamw_update(hr, piece(s.p, r), piece(s.g, r), piece(s.m, r), piece(s.v, r));
  }
}

TEST(KernelAdamWRuns, OneLaunchEqualsOneLaunchPerRunBitForBit) {
  std::int64_t n = 0;
  const std::vector<FlatRun> runs = model_like_runs(&n);
  const FlatRuns table = make_flat_runs(runs);
  State a = make_state(n, 700), b = make_state(n, 700);
  AdamWHyper h;
  h.lr = 3e-3f;
  h.weight_decay = 0.1f;
  for (long step = 1; step <= 3; ++step) {
    h.step = step;
    adamw_update_runs(h, table, a.p, a.g, a.m, a.v);
    per_run_adamw(h, runs, b);
  }
  expect_bitwise_equal("param", to_host(a.p), to_host(b.p));
  expect_bitwise_equal("exp_avg", to_host(a.m), to_host(b.m));
  expect_bitwise_equal("exp_avg_sq", to_host(a.v), to_host(b.v));
  // The padding was not touched (the per-run launches never reach it either), and the runs moved.
  const auto p0 = to_host(make_state(n, 700).p), p = to_host(a.p);
  EXPECT_EQ(p[n - 1], p0[n - 1]);
  EXPECT_NE(p[0], p0[0]);
}

TEST(KernelAdamWRuns, FoldedClipEqualsClipPassThenAdamWBitForBit) {
  std::int64_t n = 0;
  const std::vector<FlatRun> runs = model_like_runs(&n);
  const FlatRuns table = make_flat_runs(runs);
  for (const double max_norm : {0.5, 1e6}) {  // clipping, and a norm below max_norm (factor 1)
    SCOPED_TRACE(max_norm);
    State a = make_state(n, 800), b = make_state(n, 800);
    View1<double> norm_sq("norm_sq", 1);
    sum_squares(a.g, norm_sq);
    View1<float> factor("factor", 1);
    clip_factor(norm_sq, max_norm, factor);
    AdamWHyper h;
    h.weight_decay = 0.01f;
    adamw_update_runs(h, table, a.p, a.g, a.m, a.v, factor);
    clip_to_norm(b.g, norm_sq, max_norm);
    per_run_adamw(h, runs, b);
    expect_bitwise_equal("param", to_host(a.p), to_host(b.p));
    expect_bitwise_equal("exp_avg", to_host(a.m), to_host(b.m));
    expect_bitwise_equal("exp_avg_sq", to_host(a.v), to_host(b.v));
    // The fused pass left the gradient as it was; applying the factor now gives the clipped one.
    expect_bitwise_equal("unclipped grad", to_host(a.g), to_host(make_state(n, 800).g));
    apply_clip_factor(a.g, factor);
    expect_bitwise_equal("clipped grad", to_host(a.g), to_host(b.g));
  }
}

TEST(KernelAdamWRuns, RunTableMergesNeighboursAndRejectsOverlaps) {
  const FlatRuns t = make_flat_runs({{0, 4, 1}, {4, 6, 1}, {10, 0, 0}, {12, 3, 0}, {15, 1, 1}});
  EXPECT_EQ(t.count(), 3);
  EXPECT_EQ(t.span, 16);
  EXPECT_EQ(to_host(t.begin), (std::vector<std::int64_t>{0, 12, 15}));
  EXPECT_EQ(to_host(t.end), (std::vector<std::int64_t>{10, 15, 16}));
  EXPECT_EQ(to_host(t.value), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(make_flat_runs({}).span, 0);
  EXPECT_THROW(make_flat_runs({{0, 4, 1}, {3, 2, 1}}), std::invalid_argument);
  EXPECT_THROW(make_flat_runs({{0, -1, 1}}), std::invalid_argument);
  View1<float> p("p", 8);
  EXPECT_THROW(adamw_update_runs(AdamWHyper{}, make_flat_runs({{0, 9, 1}}), p, p, p, p), std::invalid_argument);
}

// Pieces of src scattered into dst at per-piece offsets (a shard's units inside the full buffer).
TEST(KernelRunsCast, OneLaunchEqualsEachPieceConverted) {
  const std::int64_t n = 5 * kRunChunk + 123, gap = 1000;
  std::vector<FlatRun> runs;
  std::int64_t at = 0, k = 0;
  for (const std::int64_t len : {std::int64_t{17}, 2 * kRunChunk + 9, std::int64_t{300}, n - 17 - 2 * kRunChunk - 9 - 300}) {
    runs.push_back({at, len, gap * ++k});  // each piece lands further along in dst
    at += len;
  }
  const FlatRuns table = make_flat_runs(runs);
  auto src = random_vector(n, 900, -70000.f, 70000.f);  // beyond fp16's range too
  src[5] = 1e-30f;
  const View1<float> s = to_device(src, "src");
  const std::int64_t dst_size = n + gap * k;
  for (const RunCast cast : {RunCast::copy, RunCast::round_bf16, RunCast::round_fp16}) {
    View1<float> got("got", dst_size), want("want", dst_size);
    cast_runs(s, table, cast, got);
    for (const FlatRun& r : runs) {
      const Unmanaged1<const float> from(s.data() + r.begin, r.length);
      const Unmanaged1<float> to(want.data() + r.begin + r.value, r.length);
      if (cast == RunCast::round_bf16) round_to_bf16(from, to);
      if (cast == RunCast::round_fp16) round_to_fp16(from, to);
      if (cast == RunCast::copy) Kokkos::deep_copy(to, from);
    }
    expect_bitwise_equal("cast", to_host(got), to_host(want));
  }
  View1<bf16> got("got_bf16", dst_size), want("want_bf16", dst_size);
  cast_runs(s, table, got);
  for (const FlatRun& r : runs) {
    to_bf16(Unmanaged1<const float>(s.data() + r.begin, r.length), Unmanaged1<bf16>(want.data() + r.begin + r.value, r.length));
  }
  expect_bitwise_equal("bf16", to_host(got), to_host(want));
}

// Units of a shard inside the full buffer, as the ZeRO engine's stages 1-2 lay them out: the owned region
// cut into pieces that each land further along in the compute weights. The pieces' edges fall inside
// parameter runs, so adamw_copy_runs must cut them.
std::vector<FlatRun> unit_pieces(std::int64_t n) {
  std::vector<FlatRun> units;
  const std::int64_t len = n / 3;
  units.push_back({0, len + 1, 0});
  units.push_back({len + 1, len, 5000});
  units.push_back({2 * len + 1, n - 2 * len - 1, 9000});
  return units;
}

// The compute weights of every parameter element, in order (element i of the owned region at i + its
// unit's offset).
template <class T>
std::vector<T> at_parameters(const std::vector<T>& weights, const std::vector<FlatRun>& params,
                             const std::vector<FlatRun>& units) {
  std::vector<T> out;
  for (const FlatRun& r : params) {
    for (std::int64_t i = r.begin; i < r.begin + r.length; ++i) {
      for (const FlatRun& u : units) {
        if (i >= u.begin && i < u.begin + u.length) out.push_back(weights[i + u.value]);
      }
    }
  }
  return out;
}

TEST(KernelAdamWRuns, UpdateWritingTheComputeWeightsEqualsUpdateThenRefreshBitForBit) {
  std::int64_t n = 0;
  const std::vector<FlatRun> decay = model_like_runs(&n);
  const std::vector<FlatRun> units = unit_pieces(n);
  const FlatRuns decay_table = make_flat_runs(decay), unit_table = make_flat_runs(units);
  const FlatRuns fused_table = make_flat_runs(adamw_copy_runs(decay, units));
  const std::int64_t full = n + 9000;
  AdamWHyper h;
  h.lr = 2e-3f;
  h.weight_decay = 0.1f;
  View1<double> norm_sq("norm_sq", 1);
  View1<float> factor("factor", 1);
  for (const int storage : {0, 1, 2, 3}) {  // bf16; fp32 as copy, rounded to bf16, rounded to fp16
    SCOPED_TRACE(storage);
    State a = make_state(n, 1000), b = make_state(n, 1000);
    sum_squares(a.g, norm_sq);
    clip_factor(norm_sq, 0.5, factor);
    // The compute weights start as something else: every element the update reaches must be rewritten.
    const View1<float> got32 = to_device(random_vector(full, 1100), "got32"), want32 = to_device(to_host(got32), "want32");
    View1<bf16> got16("got16", full), want16("want16", full);
    const RunCast cast = storage == 1 ? RunCast::copy : storage == 2 ? RunCast::round_bf16 : RunCast::round_fp16;
    const ComputeWeights copy = storage == 0 ? ComputeWeights{got16, {}, RunCast::copy} : ComputeWeights{{}, got32, cast};
    for (long step = 1; step <= 2; ++step) {
      h.step = step;
      adamw_update_runs(h, fused_table, a.p, a.g, a.m, a.v, factor, copy);
      adamw_update_runs(h, decay_table, b.p, b.g, b.m, b.v, factor);
      if (storage == 0) {
        cast_runs(b.p, unit_table, want16);
      } else {
        cast_runs(b.p, unit_table, cast, want32);
      }
    }
    expect_bitwise_equal("param", to_host(a.p), to_host(b.p));
    expect_bitwise_equal("exp_avg", to_host(a.m), to_host(b.m));
    expect_bitwise_equal("exp_avg_sq", to_host(a.v), to_host(b.v));
    // Padding, in no parameter run, is not written by the fused update (cast_runs copies it: unchanged
    // since the engine's last refresh); every element of a parameter must match.
    if (storage == 0) {
      expect_bitwise_equal("bf16 compute weights", at_parameters(to_host(got16), decay, units),
                           at_parameters(to_host(want16), decay, units));
    } else {
      expect_bitwise_equal("fp32 compute weights", at_parameters(to_host(got32), decay, units),
                           at_parameters(to_host(want32), decay, units));
    }
  }
}

TEST(KernelAdamWRuns, FusedRunTableCutsAtUnitEdgesAndRefusesUncoveredElements) {
  const std::vector<FlatRun> decay = {{0, 10, 1}, {10, 4, 0}, {16, 6, 1}};
  const std::vector<FlatRun> units = {{0, 7, 0}, {7, 15, 100}};
  const std::vector<FlatRun> got = adamw_copy_runs(decay, units);
  ASSERT_EQ(got.size(), 4u);
  const std::vector<std::int64_t> begin = {0, 7, 10, 16}, length = {7, 3, 4, 6}, value = {1, 201, 200, 201};
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].begin, begin[i]) << i;
    EXPECT_EQ(got[i].length, length[i]) << i;
    EXPECT_EQ(got[i].value, value[i]) << i;
  }
  EXPECT_THROW(adamw_copy_runs({{0, 23, 1}}, units), std::invalid_argument);             // 22 has no copy
  EXPECT_THROW(adamw_copy_runs({{0, 4, 1}}, {{1, 9, 0}}), std::invalid_argument);         // 0 has no copy
  EXPECT_THROW(adamw_copy_runs({{0, 4, 1}}, {{0, 9, -2}}), std::invalid_argument);        // negative offset
  View1<float> p("p", 8);
  EXPECT_THROW(adamw_update_runs(AdamWHyper{}, make_flat_runs({{0, 8, 1}}), p, p, p, p, {}, ComputeWeights{}),
               std::invalid_argument);  // no storage
}

}  // namespace
}  // namespace shardft
