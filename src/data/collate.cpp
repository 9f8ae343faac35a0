// Collation of tokenized samples into one padded host micro-batch, with the targets shifted so that
// targets[t] is what the logits at position t must predict.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "data/sft_data.hpp"

namespace shardft {
namespace {

constexpr std::int32_t kIgnore = -100;

}  // namespace

std::int64_t TokenBatch::num_targets() const {
  return static_cast<std::int64_t>(
      std::count_if(targets.begin(), targets.end(), [](std::int32_t t) { return t != kIgnore; }));
}

TokenBatch collate(const std::vector<TokenizedSample>& samples, const std::vector<std::int64_t>& indices,
                   int seq_len_multiple, std::int32_t pad_id) {
  if (seq_len_multiple < 1) {
    throw std::invalid_argument("collate: seq_len_multiple must be >= 1, got " + std::to_string(seq_len_multiple));
  }
  std::size_t longest = 0;
  for (std::int64_t index : indices) {
    if (index < 0 || static_cast<std::size_t>(index) >= samples.size()) {
      throw std::out_of_range("collate: sample index " + std::to_string(index) + " out of range [0, " +
                              std::to_string(samples.size()) + ")");
    }
    const TokenizedSample& s = samples[index];
    if (s.labels.size() != s.input_ids.size()) {
      throw std::invalid_argument("collate: sample " + std::to_string(index) + " has " +
                                  std::to_string(s.input_ids.size()) + " input ids but " +
                                  std::to_string(s.labels.size()) + " labels");
    }
    longest = std::max(longest, s.input_ids.size());
  }
  const std::size_t multiple = static_cast<std::size_t>(seq_len_multiple);
  const std::size_t seq = (longest + multiple - 1) / multiple * multiple;

  TokenBatch batch;
  batch.batch = static_cast<int>(indices.size());
  batch.seq = static_cast<int>(seq);
  const std::size_t total = indices.size() * seq;
  batch.input_ids.assign(total, pad_id);
  batch.position_ids.resize(total);
  batch.seq_ids.assign(total, 0);  // one sample per row: every position belongs to sample 0
  batch.targets.assign(total, kIgnore);
  batch.sample_ids.assign(total, -1);

  for (std::size_t row = 0; row < indices.size(); ++row) {
    const TokenizedSample& s = samples[indices[row]];
    const std::size_t len = s.input_ids.size();
    const std::size_t base = row * seq;
    batch.real_tokens += static_cast<std::int64_t>(len);
    std::copy(s.input_ids.begin(), s.input_ids.end(), batch.input_ids.begin() + base);
    std::fill_n(batch.sample_ids.begin() + base, len, static_cast<std::int32_t>(indices[row]));
    // Padding keeps counting positions: RoPE stays well defined there and the padded logits take no loss.
    for (std::size_t t = 0; t < seq; ++t) batch.position_ids[base + t] = static_cast<std::int32_t>(t);
    // The last real position predicts nothing inside this sample, so it stays -100 like the padding.
    for (std::size_t t = 0; t + 1 < len; ++t) batch.targets[base + t] = s.labels[t + 1];
  }
  return batch;
}

}  // namespace shardft
