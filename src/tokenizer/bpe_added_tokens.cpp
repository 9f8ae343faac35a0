// Finds added tokens in text: a byte trie matched leftmost-longest, then HF's single_word / lstrip /
// rstrip rules on each match.
#include <algorithm>
#include <cstring>

#include "tokenizer/bpe_internal.hpp"

namespace shardft::bpe {

void AddedTokenMatcher::add(const std::string& content, int token) {
  if (content.empty()) return;
  int node = 0;
  for (unsigned char c : content) {
    int child = find_child(node, c);
    if (child < 0) {
      child = static_cast<int>(nodes_.size());
      nodes_.emplace_back();
      auto& kids = nodes_[node].kids;
      kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, 0)), {c, child});
    }
    node = child;
  }
  nodes_[node].token = token;
  first_[static_cast<unsigned char>(content[0])] = true;
  const int distinct = static_cast<int>(std::count(first_.begin(), first_.end(), true));
  only_first_ = distinct == 1 ? static_cast<unsigned char>(content[0]) : -1;
}

void AddedTokenMatcher::split(std::string_view s, const std::vector<AddedToken>& tokens,
                              std::vector<Segment>& out) const {
  const std::size_t n = s.size();
  std::size_t start_offset = 0, i = 0;
  while (i < n) {
    if (only_first_ >= 0) {  // all tokens start with the same byte ("<|..."): jump to it
      const void* hit = std::memchr(s.data() + i, only_first_, n - i);
      if (!hit) break;
      i = static_cast<std::size_t>(static_cast<const char*>(hit) - s.data());
    } else if (!first_[static_cast<unsigned char>(s[i])]) {
      ++i;
      continue;
    }
    int node = 0, best = -1;
    std::size_t best_len = 0;
    for (std::size_t j = i; j < n; ++j) {
      node = find_child(node, static_cast<unsigned char>(s[j]));
      if (node < 0) break;
      if (nodes_[node].token >= 0) best = nodes_[node].token, best_len = j - i + 1;
    }
    if (best < 0) {
      ++i;
      continue;
    }
    std::size_t start = i, stop = i + best_len;
    i = stop;  // the automaton goes on after the match itself, whatever the strip rules do
    const AddedToken& t = tokens[best];
    if (t.single_word) {
      std::size_t k = start;
      const bool start_space = start == 0 || !bpe::is_word_char(bpe::prev_code_point(s, k));
      k = stop;
      const bool stop_space = stop == n || !bpe::is_word_char(bpe::next_code_point(s, k));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      std::size_t j = start;
      while (j > 0) {
        std::size_t k = j;
        if (!bpe::is_white_space(bpe::prev_code_point(s, k))) break;
        j = k;
      }
      start = std::max(j, start_offset);
    }
    if (t.rstrip) {
      while (stop < n) {
        std::size_t k = stop;
        if (!bpe::is_white_space(bpe::next_code_point(s, k))) break;
        stop = k;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, best});
    start_offset = stop;
  }
  if (start_offset < n) out.push_back({start_offset, n, -1});
}

int AddedTokenMatcher::find_child(int node, unsigned char c) const {
  const auto& kids = nodes_[node].kids;
  for (const auto& [b, child] : kids) {
    if (b == c) return child;
    if (b > c) break;
  }
  return -1;
}

}  // namespace shardft::bpe
