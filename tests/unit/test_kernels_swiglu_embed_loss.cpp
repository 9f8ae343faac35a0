// SwiGLU, token embedding and softmax cross-entropy: forward against host formulas, backward
// against central finite differences, and the overwrite / add-into / ignore_index contracts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/swiglu.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

// ---- SwiGLU ---------------------------------------------------------------------------------

constexpr int kRows = 4, kInter = 9;

std::vector<float> run_swiglu(const std::vector<float>& g, const std::vector<float>& u) {
  View2<float> s("s", kRows, kInter);
  swiglu_forward(to_device(g, kRows, kInter, "g"), to_device(u, kRows, kInter, "u"), s);
  return to_host(s);
}

struct SwigluGrads {
  std::vector<float> dg, du;
};

SwigluGrads run_swiglu_backward(const std::vector<float>& g, const std::vector<float>& u, const std::vector<float>& ds,
                                float fill) {
  View2<float> dg("dg", kRows, kInter), du("du", kRows, kInter);
  Kokkos::deep_copy(dg, fill);
  Kokkos::deep_copy(du, fill);
  swiglu_backward(to_device(g, kRows, kInter, "g"), to_device(u, kRows, kInter, "u"), to_device(ds, kRows, kInter, "ds"),
                  dg, du);
  return {to_host(dg), to_host(du)};
}

TEST(KernelSwiGlu, ForwardIsSiluOfGateTimesUp) {
  // Gates out to +-8 reach both tails of the sigmoid.
  const auto g = random_vector(kRows * kInter, 111, -8.f, 8.f), u = random_vector(kRows * kInter, 112);
  std::vector<double> ref(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) ref[i] = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
  expect_all_near("swiglu_forward", run_swiglu(g, u), ref, 1e-6, 1e-7);
}

TEST(KernelSwiGlu, BackwardMatchesFiniteDifferences) {
  const auto g = random_vector(kRows * kInter, 113, -6.f, 6.f), u = random_vector(kRows * kInter, 114);
  const auto r = random_vector(g.size(), 115);
  const SwigluGrads grads = run_swiglu_backward(g, u, r, 0.f);
  const auto loss_g = [&](const std::vector<float>& x) { return weighted_sum(run_swiglu(x, u), r); };
  const auto loss_u = [&](const std::vector<float>& x) { return weighted_sum(run_swiglu(g, x), r); };
  expect_gradient_close("swiglu_dg", grads.dg, numeric_gradient(g, loss_g, 1e-2f));
  expect_gradient_close("swiglu_du", grads.du, numeric_gradient(u, loss_u, 1e-2f));
}

TEST(KernelSwiGlu, BackwardOverwritesDgAndDu) {
  const auto g = random_vector(kRows * kInter, 116, -4.f, 4.f), u = random_vector(kRows * kInter, 117);
  const auto ds = random_vector(g.size(), 118);
  const SwigluGrads clean = run_swiglu_backward(g, u, ds, 0.f), dirty = run_swiglu_backward(g, u, ds, 1e3f);
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(dirty.dg[i], clean.dg[i]) << i;
    EXPECT_EQ(dirty.du[i], clean.du[i]) << i;
  }
}

// ---- embedding ------------------------------------------------------------------------------

constexpr int kVocab = 7, kDim = 5;
const std::vector<std::int32_t> kIds = {2, 5, 2, 0, 2, 6};  // id 2 three times; 1, 3, 4 unused

std::vector<float> run_embedding(const std::vector<float>& table) {
  View2<float> out("out", kIds.size(), kDim);
  embedding_forward(to_device(kIds, "ids"), to_device(table, kVocab, kDim, "table"), out);
  return to_host(out);
}

std::vector<float> run_embedding_backward(const std::vector<float>& dout, const std::vector<float>& dtable_init) {
  auto dtable = to_device(dtable_init, kVocab, kDim, "dtable");
  embedding_backward(to_device(kIds, "ids"), to_device(dout, kIds.size(), kDim, "dout"), dtable);
  return to_host(dtable);
}

TEST(KernelEmbedding, ForwardCopiesTableRows) {
  const auto table = random_vector(kVocab * kDim, 121);
  const auto out = run_embedding(table);
  for (std::size_t n = 0; n < kIds.size(); ++n)
    for (int j = 0; j < kDim; ++j) EXPECT_EQ(out[n * kDim + j], table[kIds[n] * kDim + j]) << n << "," << j;
}

TEST(KernelEmbedding, BackwardMatchesFiniteDifferencesWithRepeatedIds) {
  const auto table = random_vector(kVocab * kDim, 122);
  const auto r = random_vector(kIds.size() * kDim, 123);
  const auto dtable = run_embedding_backward(r, std::vector<float>(table.size(), 0.f));
  const auto loss = [&](const std::vector<float>& t) { return weighted_sum(run_embedding(t), r); };
  expect_gradient_close("embedding_dtable", dtable, numeric_gradient(table, loss, 1e-2f));
  // Rows no token uses get exactly nothing; the thrice-used row gets the sum of three rows of dout.
  for (const int unused : {1, 3, 4})
    for (int j = 0; j < kDim; ++j) EXPECT_EQ(dtable[unused * kDim + j], 0.f) << unused;
  for (int j = 0; j < kDim; ++j)
    EXPECT_FLOAT_EQ(dtable[2 * kDim + j], r[0 * kDim + j] + r[2 * kDim + j] + r[4 * kDim + j]) << j;
}

TEST(KernelEmbedding, BackwardAddsIntoTableGradient) {
  const auto dout = random_vector(kIds.size() * kDim, 124);
  const auto fresh = run_embedding_backward(dout, std::vector<float>(kVocab * kDim, 0.f));
  const auto init = random_vector(kVocab * kDim, 125, -2.f, 2.f);
  const auto added = run_embedding_backward(dout, init);
  expect_added_into("embedding_dtable", added, init, fresh);
}

TEST(KernelEmbedding, CheckTokenIdsThrowsOutOfRangeNamingTheFirstBadId) {
  EXPECT_NO_THROW(check_token_ids(to_device(kIds, "ids"), kVocab));
  EXPECT_THROW(check_token_ids(to_device(std::vector<std::int32_t>{0, kVocab}, "ids"), kVocab), std::out_of_range);
  EXPECT_THROW(check_token_ids(to_device(std::vector<std::int32_t>{-1, 3}, "ids"), kVocab), std::out_of_range);
  EXPECT_THROW(check_token_ids(to_device(std::vector<std::int32_t>{kIgnoreIndex}, "ids"), kVocab), std::out_of_range);
  try {
    check_token_ids(to_device(std::vector<std::int32_t>{1, 2, 4242, -3}, "ids"), kVocab);
    ADD_FAILURE() << "no exception for id 4242";
  } catch (const std::out_of_range& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("4242"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("-3"), std::string::npos) << msg;
  }
}

// ---- cross-entropy --------------------------------------------------------------------------

constexpr int kTok = 6, kV = 11;
const std::vector<std::int32_t> kTargets = {3, kIgnoreIndex, 0, 10, kIgnoreIndex, 7};

// Host log-softmax in double: loss_n = -log softmax(z_n)[t_n].
double host_loss_sum(const std::vector<float>& z, const std::vector<std::int32_t>& t, std::int64_t* count) {
  double sum = 0.0;
  *count = 0;
  for (std::size_t n = 0; n < t.size(); ++n) {
    if (t[n] == kIgnoreIndex) continue;
    double mx = z[n * kV];
    for (int v = 1; v < kV; ++v) mx = std::max(mx, static_cast<double>(z[n * kV + v]));
    double s = 0.0;
    for (int v = 0; v < kV; ++v) s += std::exp(z[n * kV + v] - mx);
    sum += -(z[n * kV + t[n]] - mx - std::log(s));
    ++*count;
  }
  return sum;
}

CrossEntropySums run_ce_forward(const std::vector<float>& z) {
  return cross_entropy_forward(to_device(z, kTok, kV, "logits"), to_device(kTargets, "targets"));
}

TEST(KernelCrossEntropy, ForwardMatchesHostLogSoftmaxAndSkipsIgnoredRows) {
  const auto z = random_vector(kTok * kV, 131, -3.f, 3.f);
  std::int64_t count = 0;
  const double ref = host_loss_sum(z, kTargets, &count);
  const CrossEntropySums got = run_ce_forward(z);
  EXPECT_EQ(got.count, 4);
  EXPECT_EQ(got.count, count);
  EXPECT_NEAR(got.loss_sum, ref, 1e-6 * std::fabs(ref));
  ::testing::Test::RecordProperty("ce_loss_abs_err", sci(std::fabs(got.loss_sum - ref)));
  // Ignored rows contribute nothing: changing them leaves the loss bit-identical.
  auto z2 = z;
  for (int v = 0; v < kV; ++v) z2[1 * kV + v] += 5.f;
  EXPECT_EQ(run_ce_forward(z2).loss_sum, got.loss_sum);
}

TEST(KernelCrossEntropy, LargeLogitsStayFinite) {
  auto z = random_vector(kTok * kV, 132, -3.f, 3.f);
  for (auto& x : z) x += 200.f;  // exp(200) overflows fp32: needs the max subtraction
  std::int64_t count = 0;
  const double ref = host_loss_sum(z, kTargets, &count);
  const CrossEntropySums got = run_ce_forward(z);
  ASSERT_TRUE(std::isfinite(got.loss_sum));
  EXPECT_NEAR(got.loss_sum, ref, 1e-4 * std::fabs(ref) + 1e-4);
}

TEST(KernelCrossEntropy, BackwardMatchesFiniteDifferencesAndZeroesIgnoredRows) {
  const auto z = random_vector(kTok * kV, 133, -3.f, 3.f);
  auto zd = to_device(z, kTok, kV, "logits");
  cross_entropy_forward_backward(zd, to_device(kTargets, "targets"), 1.f);
  const auto grad = to_host(zd);
  const auto loss = [&](const std::vector<float>& zp) { return run_ce_forward(zp).loss_sum; };
  expect_gradient_close("cross_entropy_dlogits", grad, numeric_gradient(z, loss, 1e-2f));
  for (std::size_t n = 0; n < kTargets.size(); ++n) {
    if (kTargets[n] != kIgnoreIndex) continue;
    for (int v = 0; v < kV; ++v) EXPECT_EQ(grad[n * kV + v], 0.f) << "ignored row " << n;
  }
}

TEST(KernelCrossEntropy, ForwardBackwardLossEqualsForwardAndGradientIsScaled) {
  const auto z = random_vector(kTok * kV, 134, -3.f, 3.f);
  const float scale = 0.25f;
  const CrossEntropySums fwd = run_ce_forward(z);
  auto zd = to_device(z, kTok, kV, "logits");
  const CrossEntropySums fb = cross_entropy_forward_backward(zd, to_device(kTargets, "targets"), scale);
  EXPECT_DOUBLE_EQ(fb.loss_sum, fwd.loss_sum);
  EXPECT_EQ(fb.count, fwd.count);
  const auto grad = to_host(zd);
  std::vector<double> ref(z.size(), 0.0);
  for (std::size_t n = 0; n < kTargets.size(); ++n) {
    if (kTargets[n] == kIgnoreIndex) continue;
    double mx = -1e300, s = 0.0;
    for (int v = 0; v < kV; ++v) mx = std::max(mx, static_cast<double>(z[n * kV + v]));
    for (int v = 0; v < kV; ++v) s += std::exp(z[n * kV + v] - mx);
    for (int v = 0; v < kV; ++v) ref[n * kV + v] = scale * (std::exp(z[n * kV + v] - mx) / s - (v == kTargets[n]));
  }
  expect_all_near("cross_entropy_scaled_grad", grad, ref, 1e-5, 1e-7);
  // Each kept row of a softmax-minus-one-hot gradient sums to zero.
  for (std::size_t n = 0; n < kTargets.size(); ++n) {
    double row = 0.0;
    for (int v = 0; v < kV; ++v) row += grad[n * kV + v];
    EXPECT_NEAR(row, 0.0, 1e-6) << n;
  }
}

}  // namespace
}  // namespace shardft
