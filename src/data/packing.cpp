#include "data/packing.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

namespace shardft {

namespace {
constexpr std::int32_t kNoTarget = -100;  // takes no loss (the HF / PyTorch ignore_index)
}  // namespace

namespace {

// Room left in each row, in a max segment tree, so that "the first row with room for len tokens" is
// one descent (O(log n)) instead of a scan over every row: the same packing as the plain first-fit
// loop, in O(n log n) for n samples. Rows not opened yet have all max_len tokens free, and they come
// after the open ones, so the leftmost fit is an open row when one fits and else the next new row.
class RowRoom {
 public:
  RowRoom(std::size_t max_rows, std::int64_t max_len) {
    while (leaves_ < max_rows) leaves_ *= 2;
    tree_.assign(2 * leaves_, max_len);
  }
  // Leftmost row with room >= len, or -1 when none has.
  std::int64_t first_fit(std::int64_t len) const {
    if (tree_[1] < len) return -1;
    std::size_t node = 1;
    while (node < leaves_) node = tree_[2 * node] >= len ? 2 * node : 2 * node + 1;
    return static_cast<std::int64_t>(node - leaves_);
  }
  void set(std::size_t row, std::int64_t room) {
    std::size_t node = row + leaves_;
    tree_[node] = room;
    for (node /= 2; node >= 1; node /= 2) tree_[node] = std::max(tree_[2 * node], tree_[2 * node + 1]);
  }
  std::int64_t room(std::size_t row) const { return tree_[row + leaves_]; }

 private:
  std::size_t leaves_ = 1;
  std::vector<std::int64_t> tree_;
};

// Sample indices, longest first (ties in index order): the order both decreasing packings place them in.
std::vector<std::int64_t> longest_first(const std::vector<TokenizedSample>& samples) {
  std::vector<std::int64_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return samples[a].input_ids.size() > samples[b].input_ids.size();
  });
  return order;
}

}  // namespace

std::vector<std::vector<std::int64_t>> pack_first_fit_decreasing(const std::vector<TokenizedSample>& samples,
                                                                 int max_len) {
  if (max_len < 1) throw std::invalid_argument("pack_first_fit_decreasing: max_len must be >= 1");
  const std::vector<std::int64_t> order = longest_first(samples);
  std::vector<std::vector<std::int64_t>> rows;
  RowRoom room(std::max<std::size_t>(samples.size(), 1), max_len);
  for (std::int64_t i : order) {
    const std::int64_t len = static_cast<std::int64_t>(samples[i].input_ids.size());
    std::int64_t r = room.first_fit(len);
    if (r < 0 || static_cast<std::size_t>(r) >= rows.size()) {
      r = static_cast<std::int64_t>(rows.size());  // a new row (longer than max_len: a row of its own)
      rows.emplace_back();
    }
    rows[r].push_back(i);
    room.set(static_cast<std::size_t>(r), room.room(static_cast<std::size_t>(r)) - len);
  }
  return rows;
}

std::vector<std::vector<std::int64_t>> pack_best_fit_decreasing(const std::vector<TokenizedSample>& samples,
                                                                int max_len) {
  if (max_len < 1) throw std::invalid_argument("pack_best_fit_decreasing: max_len must be >= 1");
  const std::vector<std::int64_t> order = longest_first(samples);
  std::vector<std::vector<std::int64_t>> rows;
  std::set<std::pair<std::int64_t, std::size_t>> open;  // (room, row): the least room that fits is one lookup
  for (std::int64_t i : order) {
    const std::int64_t len = static_cast<std::int64_t>(samples[i].input_ids.size());
    auto fit = open.lower_bound({len, 0});
    std::size_t r = rows.size();
    std::int64_t room = max_len;
    if (fit != open.end()) {
      r = fit->second;
      room = fit->first;
      open.erase(fit);
    } else {
      rows.emplace_back();  // a new row (longer than max_len: a row of its own)
    }
    rows[r].push_back(i);
    if (room - len > 0) open.insert({room - len, r});
  }
  return rows;
}

std::vector<std::vector<std::int64_t>> pack_samples(const std::vector<TokenizedSample>& samples, int max_len,
                                                    const std::string& strategy) {
  if (strategy == "bfd") return pack_best_fit_decreasing(samples, max_len);
  if (strategy == "ffd") return pack_first_fit_decreasing(samples, max_len);
  throw std::invalid_argument("packing_strategy '" + strategy + "': expected ffd or bfd");
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
  b.sample_ids.assign(n, -1);
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
        b.sample_ids[t] = static_cast<std::int32_t>(i);
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
