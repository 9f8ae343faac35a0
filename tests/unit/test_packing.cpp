// Packing: first-fit-decreasing rows, positions that restart per sample, targets that never cross a
// boundary, and the parity that matters: a packed batch gives the loss and every gradient of the same
// samples unpacked and padded (fp32, 1e-6 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <set>

#include "data/packing.hpp"
#include "model/decoder.hpp"

namespace shardft {
namespace {

std::vector<TokenizedSample> varied_samples(int n) {
  ByteTokenizer tok;
  std::vector<TokenizedSample> out;
  for (int i = 0; i < n; ++i) {
    std::string w;
    for (int k = 0; k < 1 + (i * 7) % 9; ++k) w += char('a' + (i * 3 + k * 5) % 26);
    out.push_back(apply_chat_template(tok, {{"user", "upper: " + w}, {"assistant", w + "!"}}, 64));
  }
  return out;
}

TEST(Packing, FirstFitDecreasingFillsRowsWithEverySampleOnce) {
  const auto samples = varied_samples(40);
  const int max_len = 96;
  const auto rows = pack_first_fit_decreasing(samples, max_len);
  std::multiset<std::int64_t> seen;
  for (const auto& row : rows) {
    std::size_t len = 0;
    for (auto i : row) {
      seen.insert(i);
      len += samples[i].input_ids.size();
    }
    EXPECT_LE(len, static_cast<std::size_t>(max_len));
  }
  EXPECT_EQ(seen.size(), samples.size());
  for (std::int64_t i = 0; i < 40; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
  // the first sample of the first row is a longest one
  std::size_t longest = 0;
  for (const auto& s : samples) longest = std::max(longest, s.input_ids.size());
  EXPECT_EQ(samples[rows[0][0]].input_ids.size(), longest);
  // FFD packs: fewer rows than samples, and well filled
  EXPECT_LT(rows.size(), samples.size() / 2);
  EXPECT_GT(packing_efficiency(samples, rows, max_len), 0.8);
}

// Best-fit decreasing against its definition, run naively: each sample (longest first) into the open row
// with the least room that fits it, the earliest on a tie, else a new row.
TEST(Packing, BestFitDecreasingPutsEachSampleWhereTheLeastRoomRemains) {
  const auto samples = varied_samples(60);
  const int max_len = 50;
  std::vector<std::int64_t> order(samples.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return samples[a].input_ids.size() > samples[b].input_ids.size();
  });
  std::vector<std::vector<std::int64_t>> want;
  std::vector<std::int64_t> room;
  for (std::int64_t i : order) {
    const auto len = static_cast<std::int64_t>(samples[i].input_ids.size());
    std::int64_t best = -1;
    for (std::size_t r = 0; r < want.size(); ++r) {
      if (room[r] >= len && (best < 0 || room[r] < room[best])) best = static_cast<std::int64_t>(r);
    }
    if (best < 0) {
      want.emplace_back();
      room.push_back(max_len);
      best = static_cast<std::int64_t>(want.size()) - 1;
    }
    want[best].push_back(i);
    room[best] -= len;
  }
  const auto bfd = pack_best_fit_decreasing(samples, max_len);
  EXPECT_EQ(bfd, want);
  EXPECT_EQ(pack_samples(samples, max_len, "bfd"), bfd);
  // Where the two differ: rows of 10 after 8, 7 and 5 + 4 have room 2, 3 and 1; first fit puts the 2 in
  // the first row and the last token into the second, best fit that last one into the third.
  std::vector<TokenizedSample> sized;
  for (int len : {8, 7, 5, 4, 2, 1}) sized.push_back({std::vector<std::int32_t>(len, 1), std::vector<std::int32_t>(len, 1)});
  using Rows = std::vector<std::vector<std::int64_t>>;
  EXPECT_EQ(pack_first_fit_decreasing(sized, 10), (Rows{{0, 4}, {1, 5}, {2, 3}}));
  EXPECT_EQ(pack_best_fit_decreasing(sized, 10), (Rows{{0, 4}, {1}, {2, 3, 5}}));
  EXPECT_THROW(pack_samples(samples, max_len, "wrapped"), std::invalid_argument);
}

TEST(Packing, PositionsRestartAndTargetsStayInsideTheirSample) {
  const auto samples = varied_samples(3);
  const TokenBatch b = collate_packed(samples, {{0, 1}, {2}});
  const std::size_t l0 = samples[0].input_ids.size(), l1 = samples[1].input_ids.size();
  ASSERT_EQ(b.batch, 2);
  ASSERT_EQ(b.seq, static_cast<int>(std::max(l0 + l1, samples[2].input_ids.size())));
  for (std::size_t k = 0; k < l1; ++k) {
    EXPECT_EQ(b.position_ids[l0 + k], static_cast<int>(k));
    EXPECT_EQ(b.seq_ids[l0 + k], 1);
    EXPECT_EQ(b.input_ids[l0 + k], samples[1].input_ids[k]);
  }
  EXPECT_EQ(b.position_ids[0], 0);
  EXPECT_EQ(b.seq_ids[l0 - 1], 0);
  EXPECT_EQ(b.targets[l0 - 1], -100) << "the last token of sample 0 must not predict sample 1";
  EXPECT_EQ(b.targets[l0 + l1 - 1], -100);
  EXPECT_EQ(b.targets[l0 - 2], samples[0].labels[l0 - 1]);
  // one sample per row is exactly the padded collate
  const TokenBatch single = collate_packed(samples, {{0}, {1}, {2}});
  const TokenBatch plain = collate(samples, {0, 1, 2});
  EXPECT_EQ(single.input_ids, plain.input_ids);
  EXPECT_EQ(single.targets, plain.targets);
  EXPECT_EQ(single.real_tokens, plain.real_tokens);
  EXPECT_EQ(b.real_tokens, static_cast<std::int64_t>(l0 + l1 + samples[2].input_ids.size()));
  // padding takes the pad id it is given
  const TokenBatch padded = collate_packed(samples, {{0, 1}, {2}}, 99);
  EXPECT_EQ(padded.input_ids[static_cast<std::size_t>(b.seq) + b.seq - 1],
            l0 + l1 > samples[2].input_ids.size() ? 99 : samples[2].input_ids.back());
  EXPECT_EQ(single.position_ids, plain.position_ids);
}

TEST(Packing, PackedBatchHasTheLossAndGradientsOfTheUnpackedOne) {
  ModelConfig cfg;
  cfg.vocab_size = ByteTokenizer::kVocabSize;
  cfg.hidden_size = 32;
  cfg.num_hidden_layers = 2;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 2;
  cfg.intermediate_size = 48;
  Decoder model(cfg, ComputeDtype::fp32);
  LocalParams params(model.layout());
  init_params(model.layout(), cfg, 3, params.weights());
  const auto samples = varied_samples(12);
  std::vector<std::int64_t> all(samples.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  const TokenBatch unpacked = collate(samples, all);
  const TokenBatch packed = collate_packed(samples, pack_first_fit_decreasing(samples, 64));
  ASSERT_LT(packed.batch, unpacked.batch);
  ASSERT_EQ(packed.num_targets(), unpacked.num_targets());
  const double norm = static_cast<double>(unpacked.num_targets());

  auto run = [&](const TokenBatch& b) {
    Kokkos::deep_copy(params.grads(), 0.f);
    const LossSums ls = model.forward_backward(
        upload_inputs(b.batch, b.seq, b.input_ids, b.position_ids, b.seq_ids, b.targets), params, params, norm);
    auto g = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), params.grads());
    return std::make_pair(ls.loss_sum, std::vector<float>(g.data(), g.data() + g.extent(0)));
  };
  const auto [loss_u, grad_u] = run(unpacked);
  const auto [loss_p, grad_p] = run(packed);
  EXPECT_NEAR(loss_p, loss_u, 1e-6 * loss_u);
  double num = 0, den = 0;
  for (std::size_t i = 0; i < grad_u.size(); ++i) {
    num += (double(grad_p[i]) - grad_u[i]) * (double(grad_p[i]) - grad_u[i]);
    den += double(grad_u[i]) * grad_u[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-6);
}

}  // namespace
}  // namespace shardft
