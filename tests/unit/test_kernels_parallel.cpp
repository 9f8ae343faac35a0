// The team-parallel kernels (cross-entropy, embedding backward, bias and RMSNorm weight gradients, RoPE on
// q and k) against plain host loops, at shapes that are not multiples of any team, block or window size,
// with rows wider than a team, repeated ids that span several windows of the sorted embedding gradient,
// vocabularies that need one, two and three radix passes, and rows of ignore_index. On the Serial build a
// team is one thread, so these catch wrong indexing, ranges and orders; the same tests under OpenMP or
// CUDA Kokkos also catch missing synchronisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "tests/common/device_build.hpp"
#include "kernels/bias.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/rows.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

std::vector<std::int32_t> random_ids(std::size_t n, int vocab, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, vocab - 1);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = dist(gen);
  return ids;
}

// ---- cross-entropy ----------------------------------------------------------------------------

struct CeReference {
  double loss_sum = 0.0;
  std::int64_t count = 0;
  std::vector<double> grad;  // grad_scale * (softmax - onehot), 0 on ignored rows
};

CeReference ce_reference(const std::vector<float>& z, const std::vector<std::int32_t>& t, int V, double scale) {
  CeReference r;
  r.grad.assign(z.size(), 0.0);
  for (std::size_t n = 0; n < t.size(); ++n) {
    if (t[n] == kIgnoreIndex) continue;
    const float* row = &z[n * V];
    double mx = row[0];
    for (int v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    double s = 0.0;
    for (int v = 0; v < V; ++v) s += std::exp(row[v] - mx);
    r.loss_sum += mx + std::log(s) - row[t[n]];
    ++r.count;
    for (int v = 0; v < V; ++v) r.grad[n * V + v] = scale * (std::exp(row[v] - mx) / s - (v == t[n] ? 1.0 : 0.0));
  }
  return r;
}

// 37 rows (no multiple of a warp) over vocabularies narrower and far wider than a team; targets at both
// ends of the vocabulary; a third of the rows ignored, the first and the last among them.
TEST(KernelParallelCrossEntropy, MatchesHostLoopsAtOddShapes) {
  for (const int V : {1, 5, 1000, 4099}) {
    SCOPED_TRACE("V " + std::to_string(V));
    const int N = 37;
    const auto z = random_vector(static_cast<std::size_t>(N) * V, 700 + V, -6.f, 6.f);
    std::vector<std::int32_t> t = random_ids(N, V, 800 + V);
    for (int n = 0; n < N; n += 3) t[n] = kIgnoreIndex;
    t[N - 1] = kIgnoreIndex;
    t[1] = 0;
    t[2] = V - 1;
    const float scale = 1.f / 29.f;
    const CeReference ref = ce_reference(z, t, V, scale);

    const CrossEntropySums fwd = cross_entropy_forward(to_device(z, N, V, "logits"), to_device(t, "targets"));
    EXPECT_EQ(fwd.count, ref.count);
    EXPECT_NEAR(fwd.loss_sum, ref.loss_sum, 1e-6 * std::fabs(ref.loss_sum) + 1e-6);

    auto zd = to_device(z, N, V, "logits");
    const CrossEntropySums fb = cross_entropy_forward_backward(zd, to_device(t, "targets"), scale);
    EXPECT_EQ(fb.count, ref.count);
    EXPECT_EQ(fb.loss_sum, fwd.loss_sum);  // the same reductions in the same order
    expect_all_near("ce_grad", to_host(zd), ref.grad, 1e-5, 1e-8);
  }
}

TEST(KernelParallelCrossEntropy, AllRowsIgnoredGiveZeroLossAndZeroGradient) {
  const int N = 9, V = 300;
  auto zd = to_device(random_vector(N * V, 710), N, V, "logits");
  const std::vector<std::int32_t> t(N, kIgnoreIndex);
  const CrossEntropySums s = cross_entropy_forward_backward(zd, to_device(t, "targets"), 1.f);
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.loss_sum, 0.0);
  for (const float g : to_host(zd)) ASSERT_EQ(g, 0.f);
}

TEST(KernelParallelCrossEntropy, RejectsTargetsThatDoNotMatchTheRows) {
  View2<float> z("z", 4, 7);
  EXPECT_THROW(cross_entropy_forward(z, to_device(std::vector<std::int32_t>{1, 2, 3}, "t")), std::invalid_argument);
}

// ---- embedding backward -------------------------------------------------------------------------

std::vector<double> embedding_backward_reference(const std::vector<std::int32_t>& ids, const std::vector<float>& dout,
                                                 const std::vector<float>& init, int d) {
  std::vector<double> r(init.begin(), init.end());
  for (std::size_t n = 0; n < ids.size(); ++n)
    for (int j = 0; j < d; ++j) r[static_cast<std::size_t>(ids[n]) * d + j] += dout[n * d + j];
  return r;
}

std::vector<float> run_embedding_backward(const std::vector<std::int32_t>& ids, const std::vector<float>& dout,
                                          const std::vector<float>& init, int V, int d) {
  auto dtable = to_device(init, V, d, "dtable");
  embedding_backward(to_device(ids, "ids"), to_device(dout, ids.size(), d, "dout"), dtable);
  return to_host(dtable);
}

void expect_embedding_backward_matches(const std::vector<std::int32_t>& ids, int V, int d, std::uint32_t seed) {
  const auto dout = random_vector(ids.size() * d, seed);
  const auto init = random_vector(static_cast<std::size_t>(V) * d, seed + 1);
  const auto got = run_embedding_backward(ids, dout, init, V, d);
  expect_all_near("embedding_dtable", got, embedding_backward_reference(ids, dout, init, d), 1e-5, 2e-6);
  // Rows no token uses are untouched, bit for bit.
  std::vector<bool> used(V, false);
  for (const auto id : ids) used[id] = true;
  for (int v = 0; v < V; ++v) {
    if (used[v]) continue;
    for (int j = 0; j < d; ++j) {
      const std::size_t i = static_cast<std::size_t>(v) * d + j;
      ASSERT_EQ(got[i], init[i]) << "unused id " << v;
    }
  }
  // Deterministic: a second run gives the same bits.
  EXPECT_EQ(run_embedding_backward(ids, dout, init, V, d), got);
}

// Ids repeated 1, 2, 31, 32, 33, 64, 65 and 97 times, shuffled: sorted, their runs start and end on
// and off the 32-token windows, cross one or several window edges, or fill whole windows.
TEST(KernelParallelEmbedding, BackwardSumsRepeatedIdsAcrossWindows) {
  const int V = 300, d = 19;  // 300 ids: one radix pass of 9 bits
  std::vector<std::int32_t> ids;
  const std::vector<std::pair<int, int>> repeats = {{0, 1}, {5, 2}, {6, 31}, {7, 32}, {8, 33},
                                                    {100, 64}, {101, 65}, {299, 97}, {150, 1}};
  for (const auto& [id, count] : repeats) ids.insert(ids.end(), count, id);
  const auto more = random_ids(213, V, 720);
  ids.insert(ids.end(), more.begin(), more.end());
  std::shuffle(ids.begin(), ids.end(), std::mt19937(721));
  expect_embedding_backward_matches(ids, V, d, 722);
}

TEST(KernelParallelEmbedding, BackwardWithOneIdOnlyAndWithEveryIdOnce) {
  expect_embedding_backward_matches(std::vector<std::int32_t>(100, 0), 1, 5, 730);  // one run over 4 windows
  expect_embedding_backward_matches(std::vector<std::int32_t>(64, 3), 4, 7, 731);   // two windows exactly
  std::vector<std::int32_t> every(257);
  std::iota(every.begin(), every.end(), 0);
  std::reverse(every.begin(), every.end());
  expect_embedding_backward_matches(every, 257, 3, 732);
}

// Vocabularies of 17 and 18 bits (Llama 3, Qwen2) take two radix passes: a wrong second pass, or a first
// pass that is not stable, puts tokens under the wrong id.
TEST(KernelParallelEmbedding, BackwardWithLargeVocabularies) {
  for (const int V : {128256, 151936}) {
    SCOPED_TRACE("V " + std::to_string(V));
    auto ids = random_ids(500, V, 740);
    // 511, 1023 and 65535 share their low 9-bit digit and differ in the high one; V - 1 is the largest id.
    for (int i = 0; i < 40; ++i) {
      ids[7 * i] = 511;
      ids[7 * i + 2] = 1023;
      ids[7 * i + 4] = 65535;
      ids[7 * i + 6] = V - 1;
    }
    expect_embedding_backward_matches(ids, V, 2, 741);
  }
}

// The grouping the backward sums by: ids ascending, equal ids in token order. On one thread any grouping
// of the tokens still adds up to the right rows, so the order is checked on its own. 1025 ids: two radix
// passes of 6 bits; 2^21: three of 7.
TEST(KernelParallelEmbedding, SortTokensByIdIsAStableSort) {
  for (const int V : {1, 300, 1024, 1025, 128256, 151936, 1 << 21}) {
    SCOPED_TRACE("V " + std::to_string(V));
    auto ids = random_ids(777, V, 790);
    for (int i = 0; i < 50; ++i) {
      ids[13 * i] = V - 1;
      ids[13 * i + 5] = std::min(511, V - 1);  // shares its low digit(s) with V - 1 for several V
    }
    std::vector<std::int32_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return ids[a] < ids[b]; });
    std::vector<std::int32_t> want_ids(ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) want_ids[k] = ids[order[k]];
    View1<std::int32_t> sorted("sorted", ids.size()), positions("positions", ids.size());
    sort_tokens_by_id(to_device(ids, "ids"), V, sorted, positions);
    EXPECT_EQ(to_host(sorted), want_ids);
    EXPECT_EQ(to_host(positions), order);
  }
}

TEST(KernelParallelEmbedding, BackwardWithNoTokensAndShapeChecks) {
  const auto init = random_vector(6 * 4, 750);
  EXPECT_EQ(run_embedding_backward({}, {}, init, 6, 4), init);
  View2<float> dtable("dtable", 6, 4), dout_wrong("dout", 3, 5);
  EXPECT_THROW(embedding_backward(to_device(std::vector<std::int32_t>{1, 2, 3}, "ids"), dout_wrong, dtable),
               std::invalid_argument);
  View2<float> out("out", 2, 4);
  EXPECT_THROW(embedding_forward(to_device(std::vector<std::int32_t>{1, 2, 3}, "ids"), dtable, out),
               std::invalid_argument);
}

TEST(KernelParallelEmbedding, HostCheckNamesTheIdItsPositionAndTheVocabulary) {
  const std::vector<std::int32_t> ok = {0, 5, 271}, bad = {3, 272, -1};
  EXPECT_NO_THROW(check_token_ids(ok.data(), ok.size(), 272));
  try {
    check_token_ids(bad.data(), bad.size(), 272);
    ADD_FAILURE() << "no exception for id 272";
  } catch (const std::out_of_range& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("token id 272 at position 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[0, 272)"), std::string::npos) << msg;
  }
}

// ---- bias and RMSNorm weight gradients: column sums over blocks of rows ----------------------------

TEST(KernelParallelBias, BackwardMatchesColumnSumsOverPartialBlocks) {
  for (const int rows : {1, 63, 64, 131, 640}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const int cols = 37;
    const auto dy = random_vector(static_cast<std::size_t>(rows) * cols, 760 + rows);
    const auto db0 = random_vector(cols, 761);
    auto db = to_device(db0, "db");
    bias_backward(to_device(dy, rows, cols, "dy"), db);
    std::vector<double> ref(db0.begin(), db0.end());
    for (int n = 0; n < rows; ++n)
      for (int j = 0; j < cols; ++j) ref[j] += dy[static_cast<std::size_t>(n) * cols + j];
    expect_all_near("bias_db", to_host(db), ref, 1e-5, 1e-5);
  }
  auto db = to_device(std::vector<float>{1.f, 2.f}, "db");
  bias_backward(View2<float>("dy", 0, 2), db);  // no rows: db unchanged
  EXPECT_EQ(to_host(db), (std::vector<float>{1.f, 2.f}));
}

// ---- RoPE on q and k ------------------------------------------------------------------------------

// head_dim 6 has fewer pairs than vector lanes; 600 more than the 256 the per-thread arrays of the
// kernel this replaces could hold; k may have no heads at all.
TEST(KernelParallelRope, RotateQkEqualsThePerTokenKernelAtAnyHeadDim) {
  const std::vector<std::int32_t> pos = {0, 7, 1, 40, 300, 3};  // 300: beyond the table
  const int rows = static_cast<int>(pos.size());
  for (const int hd : {6, 600}) {
    for (const int k_heads : {0, 3}) {
      SCOPED_TRACE("hd " + std::to_string(hd) + " k_heads " + std::to_string(k_heads));
      const int q_heads = 5;
      const RopeTable table = make_rope_table(64, hd, 500000.0);
      const auto q0 = random_vector(static_cast<std::size_t>(rows) * q_heads * hd, 780);
      const auto k0 = random_vector(static_cast<std::size_t>(rows) * k_heads * hd, 781);
      for (const bool inverse : {false, true}) {
        auto q = to_device(q0, rows, q_heads * hd, "q"), k = to_device(k0, rows, k_heads * hd, "k");
        auto q_ref = to_device(q0, rows, q_heads * hd, "q_ref"), k_ref = to_device(k0, rows, k_heads * hd, "k_ref");
        auto pd = to_device(pos, "pos");
        rope_rotate_qk(q, k, pd, table, inverse);
        (inverse ? rope_backward : rope_forward)(q_ref, pd, hd, 500000.0);
        (inverse ? rope_backward : rope_forward)(k_ref, pd, hd, 500000.0);
        // Exact on the CPU. On a GPU nvcc contracts the two kernels' products into FMAs differently: a few
        // ulps of the inputs (in [-1, 1]), which q0 cos - q1 sin can cancel down to a small result.
        for (const auto& [got, want] : {std::pair{to_host(q), to_host(q_ref)}, std::pair{to_host(k), to_host(k_ref)}}) {
          ASSERT_EQ(got.size(), want.size());
          for (std::size_t i = 0; i < got.size(); ++i) {
            ASSERT_LE(std::abs(got[i] - want[i]), testing_util::host_or_device_tol(0, 3e-7))
                << i << ": " << got[i] << " vs " << want[i];
          }
        }
      }
    }
  }
}

TEST(KernelParallelRope, RotateQkRejectsShapesThatAreNotWholeHeads) {
  const RopeTable table = make_rope_table(8, 8, 10000.0);
  View2<float> q("q", 2, 16), k_bad("k", 2, 12), k("k", 2, 8);
  const auto pos = to_device(std::vector<std::int32_t>{0, 1}, "pos");
  EXPECT_THROW(rope_rotate_qk(q, k_bad, pos, table, false), std::invalid_argument);
  EXPECT_THROW(rope_rotate_qk(q, k, to_device(std::vector<std::int32_t>{0}, "pos1"), table, false),
               std::invalid_argument);
  EXPECT_NO_THROW(rope_rotate_qk(q, k, pos, table, false));
}

}  // namespace
}  // namespace shardft
