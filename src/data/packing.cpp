#include "data/packing.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace shardft {

namespace {
constexpr std::int32_t kNoTarget = -100;  // takes no loss (the HF / PyTorch ignore_index)
}  // namespace

std::vector<std::vector<std::int64_t>> pack_first_fit_decreasing(const std::vector<TokenizedSample>& samples,
                                                                 int max_len) {
  if (max_len < 1) throw std::invalid_argument("pack_first_fit_decreasing: max_len must be >= 1");
  std::vector<std::int64_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return samples[a].input_ids.size() > samples[b].input_ids.size();
  });
  std::vector<std::vector<std::int64_t>> rows;
  std::vector<std::int64_t> room;
  for (std::int64_t i : order) {
    const std::int64_t len = static_cast<std::int64_t>(samples[i].input_ids.size());
    std::size_t r = 0;
    while (r < rows.size() && room[r] < len) ++r;
    if (r == rows.size()) {
      rows.emplace_back();
      room.push_back(max_len);
    }
    rows[r].push_back(i);
    room[r] -= len;
  }
  return rows;
}

TokenBatch collate_packed(const std::vector<TokenizedSample>& samples,
                          const std::vector<std::vector<std::int64_t>>& rows, std::int32_t pad_id) {
  TokenBatch b;
  b.batch = static_cast<int>(rows.size());
  for (const auto& row : rows) {
    std::size_t len = 0;
    for (std::int64_t i : row) {
      if (i < 0 || static_cast<std::size_t>(i) >= samples.size()) {
        throw std::out_of_range("collate_packed: sample index " + std::to_string(i) + " out of range");
      }
      len += samples[i].input_ids.size();
    }
    b.seq = std::max<int>(b.seq, static_cast<int>(len));
    b.real_tokens += static_cast<std::int64_t>(len);
  }
  const std::size_t n = static_cast<std::size_t>(b.batch) * b.seq;
  b.input_ids.assign(n, pad_id);
  b.position_ids.assign(n, 0);
  b.seq_ids.assign(n, 0);
  b.targets.assign(n, kNoTarget);
  for (int r = 0; r < b.batch; ++r) {
    std::size_t t = static_cast<std::size_t>(r) * b.seq;
    const std::size_t row_end = t + b.seq;
    int sid = 0;
    for (std::int64_t i : rows[r]) {
      const TokenizedSample& s = samples[i];
      for (std::size_t k = 0; k < s.input_ids.size(); ++k, ++t) {
        b.input_ids[t] = s.input_ids[k];
        b.position_ids[t] = static_cast<std::int32_t>(k);
        b.seq_ids[t] = sid;
        // targets are shifted inside the sample: its last token predicts nothing
        b.targets[t] = k + 1 < s.labels.size() ? s.labels[k + 1] : kNoTarget;
      }
      ++sid;
    }
    // Padding counts on from the row's start (as collate does) and gets a seq_id of its own, so it
    // never joins a sample.
    for (const std::size_t row_start = row_end - b.seq; t < row_end; ++t) {
      b.position_ids[t] = static_cast<std::int32_t>(t - row_start);
      b.seq_ids[t] = sid;
    }
  }
  return b;
}

double packing_efficiency(const std::vector<TokenizedSample>& samples,
                          const std::vector<std::vector<std::int64_t>>& rows, int max_len) {
  double real = 0;
  for (const auto& row : rows) {
    for (std::int64_t i : row) real += static_cast<double>(samples[i].input_ids.size());
  }
  return rows.empty() ? 0.0 : real / (static_cast<double>(rows.size()) * max_len);
}

}  // namespace shardft
