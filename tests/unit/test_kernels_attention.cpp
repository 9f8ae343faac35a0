// Causal grouped-query attention: forward and saved probabilities against a naive host loop in
// double, the packed-sample mask (seq_ids), and the backward against central finite differences
// for q, k and v, for GQA (heads 4, kv_heads 2), MHA and MQA shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "kernels/attention.hpp"

namespace shardft {
namespace {

using namespace kernel_test;

struct AttnCase {
  AttentionShape shape;
  std::vector<std::int32_t> seq_ids;  // [batch * seq]
  std::string name;
};

// Batch row 0 packs two samples (3 + 3 tokens), row 1 packs three (2 + 3 + 1).
AttnCase gqa_packed() { return {{2, 6, 4, 2, 4}, {0, 0, 0, 1, 1, 1, 3, 3, 4, 4, 4, 5}, "gqa_packed"}; }
AttnCase mha_single() { return {{1, 5, 2, 2, 8}, {0, 0, 0, 0, 0}, "mha"}; }
AttnCase mqa_packed() { return {{1, 5, 3, 1, 2}, {7, 7, 8, 8, 8}, "mqa_packed"}; }

struct AttnInputs {
  std::vector<float> q, k, v;
};

AttnInputs make_inputs(const AttentionShape& s, std::uint32_t seed) {
  const std::size_t rows = static_cast<std::size_t>(s.batch) * s.seq;
  // Scores of order one (|q|,|k| up to 1.5): softmax is far from uniform, yet not saturated.
  return {random_vector(rows * s.heads * s.head_dim, seed, -1.5f, 1.5f),
          random_vector(rows * s.kv_heads * s.head_dim, seed + 1, -1.5f, 1.5f),
          random_vector(rows * s.kv_heads * s.head_dim, seed + 2)};
}

struct AttnOutputs {
  std::vector<float> o, probs;
};

AttnOutputs run_forward(const AttentionShape& s, const AttnInputs& in, const std::vector<std::int32_t>& seq_ids) {
  const std::size_t rows = static_cast<std::size_t>(s.batch) * s.seq;
  auto q = to_device(in.q, rows, s.heads * s.head_dim, "q");
  auto k = to_device(in.k, rows, s.kv_heads * s.head_dim, "k");
  auto v = to_device(in.v, rows, s.kv_heads * s.head_dim, "v");
  auto ids = to_device(seq_ids, "seq_ids");
  View2<float> o("o", rows, s.heads * s.head_dim);
  View1<float> probs("probs", s.probs_size());
  attention_forward(s, q, k, v, ids, o, probs);
  return {to_host(o), to_host(probs)};
}

struct AttnGrads {
  std::vector<float> dq, dk, dv;
};

// fill: the value dq, dk, dv and the dscores scratch hold before the call (they must be overwritten).
AttnGrads run_backward(const AttentionShape& s, const AttnInputs& in, const std::vector<std::int32_t>& seq_ids,
                       const std::vector<float>& dout, float fill) {
  const std::size_t rows = static_cast<std::size_t>(s.batch) * s.seq;
  const std::size_t qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
  auto q = to_device(in.q, rows, qw, "q");
  auto k = to_device(in.k, rows, kw, "k");
  auto v = to_device(in.v, rows, kw, "v");
  auto ids = to_device(seq_ids, "seq_ids");
  View2<float> o("o", rows, qw);
  View1<float> probs("probs", s.probs_size());
  attention_forward(s, q, k, v, ids, o, probs);
  auto dod = to_device(dout, rows, qw, "dout");
  View2<float> dq("dq", rows, qw), dk("dk", rows, kw), dv("dv", rows, kw);
  View1<float> dscores("dscores", s.probs_size());
  Kokkos::deep_copy(dq, fill);
  Kokkos::deep_copy(dk, fill);
  Kokkos::deep_copy(dv, fill);
  Kokkos::deep_copy(dscores, fill);
  attention_backward(s, q, k, v, probs, dod, dq, dk, dv, dscores);
  return {to_host(dq), to_host(dk), to_host(dv)};
}

bool visible(const AttnCase& c, int b, int i, int j) {
  const int T = c.shape.seq;
  return j <= i && c.seq_ids[b * T + j] == c.seq_ids[b * T + i];
}

// The definition, written out: scores, masked softmax, weighted sum of values, in double.
struct AttnReference {
  std::vector<double> o, probs;
};

AttnReference reference_attention(const AttnCase& c, const AttnInputs& in) {
  const AttentionShape& s = c.shape;
  const int T = s.seq, H = s.heads, G = s.kv_heads, hd = s.head_dim, rep = H / G;
  AttnReference ref{std::vector<double>(static_cast<std::size_t>(s.batch) * T * H * hd, 0.0),
                    std::vector<double>(s.probs_size(), 0.0)};
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < H; ++h) {
      const int g = h / rep;  // HF repeat_kv: query head h reads kv head h / (H / G)
      for (int i = 0; i < T; ++i) {
        std::vector<double> score(T, -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < T; ++j) {
          if (!visible(c, b, i, j)) continue;
          double dot = 0.0;
          for (int e = 0; e < hd; ++e)
            dot += static_cast<double>(in.q[(b * T + i) * H * hd + h * hd + e]) * in.k[(b * T + j) * G * hd + g * hd + e];
          score[j] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, score[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < T; ++j) sum += visible(c, b, i, j) ? std::exp(score[j] - mx) : 0.0;
        for (int j = 0; j < T; ++j) {
          const double p = visible(c, b, i, j) ? std::exp(score[j] - mx) / sum : 0.0;
          ref.probs[((static_cast<std::size_t>(b) * H + h) * T + i) * T + j] = p;
          for (int e = 0; e < hd; ++e) ref.o[(b * T + i) * H * hd + h * hd + e] += p * in.v[(b * T + j) * G * hd + g * hd + e];
        }
      }
    }
  }
  return ref;
}

TEST(KernelAttention, ForwardMatchesNaiveHostLoop) {
  for (const AttnCase& c : {gqa_packed(), mha_single(), mqa_packed()}) {
    SCOPED_TRACE(c.name);
    const AttnInputs in = make_inputs(c.shape, 31);
    const AttnOutputs got = run_forward(c.shape, in, c.seq_ids);
    const AttnReference ref = reference_attention(c, in);
    expect_all_near("attention_o_" + c.name, got.o, ref.o, 1e-5, 1e-6);
    expect_all_near("attention_probs_" + c.name, got.probs, ref.probs, 1e-5, 1e-7);
  }
}

TEST(KernelAttention, ProbsSumToOneOverVisibleKeysAndVanishAcrossSamples) {
  const AttnCase c = gqa_packed();
  const AttentionShape& s = c.shape;
  const AttnOutputs got = run_forward(s, make_inputs(s, 32), c.seq_ids);
  const int T = s.seq;
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < T; ++i) {
        double sum = 0.0;
        for (int j = 0; j < T; ++j) {
          const float p = got.probs[((static_cast<std::size_t>(b) * s.heads + h) * T + i) * T + j];
          if (visible(c, b, i, j)) {
            EXPECT_GT(p, 0.f) << "b" << b << " h" << h << " i" << i << " j" << j;
            sum += p;
          } else {
            // Future keys and keys of another packed sample: exactly zero, not just small.
            EXPECT_EQ(p, 0.f) << "b" << b << " h" << h << " i" << i << " j" << j;
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-6) << "b" << b << " h" << h << " i" << i;
      }
    }
  }
  // The first token of each packed sample sees only itself.
  for (int h = 0; h < s.heads; ++h) {
    EXPECT_FLOAT_EQ(got.probs[(static_cast<std::size_t>(h) * T + 3) * T + 3], 1.f) << "row 0, token 3, head " << h;
    EXPECT_FLOAT_EQ(got.probs[((static_cast<std::size_t>(s.heads) + h) * T + 5) * T + 5], 1.f) << "row 1, token 5";
  }
}

TEST(KernelAttention, PackedSampleMatchesTheSampleAlone) {
  // The second sample of batch row 0 (tokens 3..5) must come out as if it were run by itself.
  const AttnCase c = gqa_packed();
  const AttentionShape& s = c.shape;
  const AttnInputs in = make_inputs(s, 33);
  const AttnOutputs packed = run_forward(s, in, c.seq_ids);
  const AttentionShape alone_shape{1, 3, s.heads, s.kv_heads, s.head_dim};
  const int qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
  AttnInputs alone{std::vector<float>(in.q.begin() + 3 * qw, in.q.begin() + 6 * qw),
                   std::vector<float>(in.k.begin() + 3 * kw, in.k.begin() + 6 * kw),
                   std::vector<float>(in.v.begin() + 3 * kw, in.v.begin() + 6 * kw)};
  const AttnOutputs single = run_forward(alone_shape, alone, {0, 0, 0});
  const std::vector<float> packed_tail(packed.o.begin() + 3 * qw, packed.o.begin() + 6 * qw);
  expect_all_near("attention_packed_vs_alone", packed_tail, single.o, 1e-6, 1e-7);
}

void check_backward_against_finite_differences(const AttnCase& c, std::uint32_t seed) {
  SCOPED_TRACE(c.name);
  const AttentionShape& s = c.shape;
  const AttnInputs in = make_inputs(s, seed);
  const std::vector<float> r = random_vector(static_cast<std::size_t>(s.batch) * s.seq * s.heads * s.head_dim, seed + 7);
  const AttnGrads g = run_backward(s, in, c.seq_ids, r, 0.f);
  const float h = 5e-3f;

  const auto loss_q = [&](const std::vector<float>& x) {
    return weighted_sum(run_forward(s, {x, in.k, in.v}, c.seq_ids).o, r);
  };
  const auto loss_k = [&](const std::vector<float>& x) {
    return weighted_sum(run_forward(s, {in.q, x, in.v}, c.seq_ids).o, r);
  };
  const auto loss_v = [&](const std::vector<float>& x) {
    return weighted_sum(run_forward(s, {in.q, in.k, x}, c.seq_ids).o, r);
  };
  expect_gradient_close("attention_dq_" + c.name, g.dq, numeric_gradient(in.q, loss_q, h));
  expect_gradient_close("attention_dk_" + c.name, g.dk, numeric_gradient(in.k, loss_k, h));
  expect_gradient_close("attention_dv_" + c.name, g.dv, numeric_gradient(in.v, loss_v, h));
}

TEST(KernelAttention, BackwardMatchesFiniteDifferencesGqaPacked) { check_backward_against_finite_differences(gqa_packed(), 40); }
TEST(KernelAttention, BackwardMatchesFiniteDifferencesMha) { check_backward_against_finite_differences(mha_single(), 50); }
TEST(KernelAttention, BackwardMatchesFiniteDifferencesMqaPacked) { check_backward_against_finite_differences(mqa_packed(), 60); }

TEST(KernelAttention, BackwardOverwritesGradientsAndScratch) {
  const AttnCase c = gqa_packed();
  const AttentionShape& s = c.shape;
  const AttnInputs in = make_inputs(s, 70);
  const auto r = random_vector(in.q.size(), 71);
  const AttnGrads clean = run_backward(s, in, c.seq_ids, r, 0.f);
  const AttnGrads dirty = run_backward(s, in, c.seq_ids, r, 1e3f);
  for (std::size_t i = 0; i < clean.dq.size(); ++i) EXPECT_EQ(dirty.dq[i], clean.dq[i]) << "dq " << i;
  for (std::size_t i = 0; i < clean.dk.size(); ++i) EXPECT_EQ(dirty.dk[i], clean.dk[i]) << "dk " << i;
  for (std::size_t i = 0; i < clean.dv.size(); ++i) EXPECT_EQ(dirty.dv[i], clean.dv[i]) << "dv " << i;
}

}  // namespace
}  // namespace shardft
