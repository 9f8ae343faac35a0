// The memory-efficient attention (log-sum-exp saved, scores recomputed) against the exact kernel
// that stores the probabilities: same output and the same dq, dk, dv, with grouped-query heads and
// packed samples; and its own backward against finite differences of its own forward.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/common/relative_difference.hpp"
#include "finite_difference.hpp"
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
