// HF tokenizer.json byte-level BPE, the encode / decode pipeline (bpe_load.cpp reads the file): added
// tokens -> NFC -> added tokens on the normalized text -> Split regexes -> ByteLevel (prefix space, GPT-2
// regex) -> BPE merges, with byte spans into the original text.
#include "data/bpe_tokenizer.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "data/bpe_internal.hpp"
#include "data/sft_data.hpp"

namespace shardft {
namespace {

using bpe::AddedToken;
using bpe::Range;

// Leftmost-longest matching of a set of strings (a byte trie), then HF's single_word / lstrip / rstrip
// rules on each match (AddedVocabulary::find_matches).
class AddedTokenMatcher {
 public:
  struct Segment {
    std::size_t begin, end;
    int token;  // index into the added tokens, -1 for plain text
  };
  bool empty() const { return nodes_.size() == 1; }
  void add(const std::string& content, int token) {
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
  // Appends the segments of s (offsets into s); nothing for an empty s.
  void split(std::string_view s, const std::vector<AddedToken>& tokens, std::vector<Segment>& out) const {
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

 private:
  struct Node {
    int token = -1;
    std::vector<std::pair<unsigned char, int>> kids;  // sorted by byte
  };
  int find_child(int node, unsigned char c) const {
    const auto& kids = nodes_[node].kids;
    for (const auto& [b, child] : kids) {
      if (b == c) return child;
      if (b > c) break;
    }
    return -1;
  }
  std::vector<Node> nodes_{1};
  std::array<bool, 256> first_{};
  int only_first_ = -1;  // the one first byte all tokens share, else -1
};

// Working memory of one encode call (one per thread).
struct EncodeScratch {
  std::vector<AddedTokenMatcher::Segment> raw_segments, norm_segments;
  std::string normalized;
  std::vector<std::uint32_t> norm_map;
  std::vector<Range> pieces, next_pieces, words;
  std::string prefixed;
  bpe::MergeScratch merge;
  std::vector<std::int32_t> word_ids;
  std::vector<std::uint32_t> word_lens;
};

class BpeTokenizer : public Tokenizer {
 public:
  BpeTokenizer(const std::string& file, const std::string& content);

  std::vector<std::int32_t> encode(const std::string& text, std::vector<TokenSpan>* spans) const override;
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const override;
  int vocab_size() const override { return spec_.vocab_size; }
  std::int32_t special_token_id(const std::string& content) const override {
    const auto it = added_ids_.find(content);
    return it == added_ids_.end() ? -1 : it->second;
  }
  std::string fingerprint() const override { return fingerprint_; }

 private:
  // One call's state: the output and where the cache is (null when another thread holds it).
  struct Run {
    std::vector<std::int32_t>& ids;
    std::vector<TokenSpan>* spans;
    bpe::WordCache* cache;
    EncodeScratch& scratch;
    std::size_t last_end = 0;
    void emit(std::int32_t id, std::size_t begin, std::size_t end) {
      ids.push_back(id);
      if (!spans) return;
      begin = std::max(begin, last_end);  // overlapping HF segments (rstrip into a match) stay ordered
      end = std::max(end, begin);
      spans->push_back({begin, end});
      last_end = end;
    }
  };
  void encode_text(Run& run, std::string_view piece, std::size_t base) const;
  // Pre-tokenizes work[r] (after the added tokens are out) and encodes each word; `orig` maps offsets
  // of `work` to the original text.
  template <class Orig>
  void pre_tokenize(Run& run, std::string_view work, Range r, const Orig& orig) const;
  // One word: `work_begin` is the offset in `work` of the word's first real byte; `virtual_space`: the
  // word starts with a space the ByteLevel pre-tokenizer added, which covers no input byte.
  template <class Orig>
  void encode_word(Run& run, std::string_view word, std::size_t work_begin, bool virtual_space, const Orig& orig) const;

  const bpe::BpeSpec spec_;
  std::string fingerprint_;
  std::unordered_map<std::string, std::int32_t> added_ids_;
  AddedTokenMatcher raw_matcher_, norm_matcher_;  // normalized=false tokens / normalized=true tokens
  mutable std::mutex cache_mutex_;
  mutable bpe::WordCache cache_;
};

EncodeScratch& scratch() {
  thread_local EncodeScratch s;
  return s;
}

std::vector<std::int32_t> BpeTokenizer::encode(const std::string& text, std::vector<TokenSpan>* spans) const {
  const std::size_t bad = bpe::find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    throw DataError("BPE tokenizer: text is not valid UTF-8 (byte " + std::to_string(bad) + " of " +
                    std::to_string(text.size()) + ")");
  }
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (spans) {
    spans->clear();
    spans->reserve(text.size() / 3 + 4);
  }
  std::unique_lock<std::mutex> lock(cache_mutex_, std::try_to_lock);
  EncodeScratch& sc = scratch();
  Run run{ids, spans, lock.owns_lock() ? &cache_ : nullptr, sc};
  if (raw_matcher_.empty()) {
    encode_text(run, text, 0);
  } else {
    sc.raw_segments.clear();
    raw_matcher_.split(text, spec_.added, sc.raw_segments);
    for (const auto& seg : sc.raw_segments) {
      if (seg.token >= 0) {
        run.emit(spec_.added[seg.token].id, seg.begin, seg.end);
      } else {
        encode_text(run, std::string_view(text).substr(seg.begin, seg.end - seg.begin), seg.begin);
      }
    }
  }
  return ids;
}

void BpeTokenizer::encode_text(Run& run, std::string_view piece, std::size_t base) const {
  EncodeScratch& sc = run.scratch;
  std::string_view work = piece;
  const std::uint32_t* map = nullptr;
  if (spec_.nfc && bpe::nfc(piece, sc.normalized, sc.norm_map)) {
    work = sc.normalized;
    map = sc.norm_map.data();
  }
  const auto orig = [base, map](std::size_t x) { return base + (map ? map[x] : x); };
  if (norm_matcher_.empty()) {
    if (!work.empty()) pre_tokenize(run, work, {0, work.size()}, orig);
    return;
  }
  sc.norm_segments.clear();
  norm_matcher_.split(work, spec_.added, sc.norm_segments);
  for (const auto& seg : sc.norm_segments) {
    if (seg.token >= 0) {
      run.emit(spec_.added[seg.token].id, orig(seg.begin), orig(seg.end));
    } else {
      pre_tokenize(run, work, {seg.begin, seg.end}, orig);
    }
  }
}

template <class Orig>
void BpeTokenizer::pre_tokenize(Run& run, std::string_view work, Range r, const Orig& orig) const {
  EncodeScratch& sc = run.scratch;
  auto& pieces = sc.pieces;
  pieces.assign(1, r);
  for (const auto& re : spec_.splits) {
    sc.next_pieces.clear();
    for (const Range& p : pieces) re->split_isolated(work.substr(p.begin, p.end - p.begin), p.begin, sc.next_pieces);
    pieces.swap(sc.next_pieces);
  }
  for (const Range& p : pieces) {  // the ByteLevel step
    const std::string_view s = work.substr(p.begin, p.end - p.begin);
    if (spec_.prefix_space && s[0] != ' ') {
      sc.prefixed.assign(1, ' ');
      sc.prefixed.append(s.data(), s.size());
      const std::string_view pre = sc.prefixed;
      if (!spec_.byte_level_regex) {
        encode_word(run, pre, p.begin, true, orig);
        continue;
      }
      sc.words.clear();
      spec_.byte_level_regex->split_isolated(pre, 0, sc.words);
      for (const Range& w : sc.words) {
        const std::string_view word = pre.substr(w.begin, w.end - w.begin);
        if (w.begin == 0) {
          encode_word(run, word, p.begin, true, orig);
        } else {
          encode_word(run, word, p.begin + w.begin - 1, false, orig);
        }
      }
    } else if (spec_.byte_level_regex) {
      sc.words.clear();
      spec_.byte_level_regex->split_isolated(s, p.begin, sc.words);
      for (const Range& w : sc.words) encode_word(run, work.substr(w.begin, w.end - w.begin), w.begin, false, orig);
    } else {
      encode_word(run, s, p.begin, false, orig);
    }
  }
}

template <class Orig>
void BpeTokenizer::encode_word(Run& run, std::string_view word, std::size_t work_begin, bool virtual_space,
                               const Orig& orig) const {
  EncodeScratch& sc = run.scratch;
  const std::int32_t* ids = nullptr;
  const std::uint32_t* lens = nullptr;
  std::size_t n = 0;
  if (!run.cache || !run.cache->find(word, &ids, &lens, &n)) {
    sc.word_ids.clear();
    sc.word_lens.clear();
    spec_.model.tokenize(word, sc.merge, sc.word_ids, sc.word_lens);
    if (run.cache) run.cache->insert(word, sc.word_ids.data(), sc.word_lens.data(), sc.word_ids.size());
    ids = sc.word_ids.data();
    lens = sc.word_lens.data();
    n = sc.word_ids.size();
  }
  // Offset v in the word -> offset in work.
  const auto at = [&](std::size_t v) { return work_begin + (virtual_space ? (v > 0 ? v - 1 : 0) : v); };
  std::size_t v = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t b = v;
    v += lens[k];
    run.emit(ids[k], orig(at(b)), orig(at(v)));
  }
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (std::int32_t id : ids) {
    if (id < 0 || id >= spec_.vocab_size) continue;
    const std::uint8_t kind = spec_.id_kind[id];
    if (kind == 0 || (kind == 2 && skip_special_tokens)) continue;
    bytes += spec_.decode_bytes[id];
  }
  if (bpe::find_invalid_utf8(bytes) == std::string_view::npos) return bytes;
  std::string text;
  bpe::append_utf8_lossy(bytes, text);
  return text;
}

BpeTokenizer::BpeTokenizer(const std::string& file, const std::string& content)
    : spec_(bpe::read_bpe_spec(file, content)) {
  std::ostringstream hash;
  hash << std::hex << std::setw(16) << std::setfill('0') << bpe::fnv1a64(content);
  fingerprint_ = "bpe:" + file + ":" + hash.str();
  std::string normalized;
  std::vector<std::uint32_t> unused_map;
  for (std::size_t i = 0; i < spec_.added.size(); ++i) {
    const AddedToken& t = spec_.added[i];
    added_ids_[t.content] = t.id;
    if (!t.normalized) {
      raw_matcher_.add(t.content, static_cast<int>(i));
    } else if (spec_.nfc && bpe::nfc(t.content, normalized, unused_map)) {
      norm_matcher_.add(normalized, static_cast<int>(i));  // matched in NFC text, so NFC it too
    } else {
      norm_matcher_.add(t.content, static_cast<int>(i));
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path + ": cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::unique_ptr<Tokenizer> load_bpe_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string file = path;
  if (fs::is_directory(path, ec)) {
    file = (fs::path(path) / "tokenizer.json").string();
    if (!fs::is_regular_file(file, ec)) {
      throw DataError(path + ": no tokenizer.json in this directory (expected an HF tokenizer directory)");
    }
  } else if (!fs::exists(path, ec)) {
    throw DataError(path + ": no such file (expected \"byte\", a tokenizer.json file or a directory holding one)");
  }
  return std::make_unique<BpeTokenizer>(file, read_file(file));
}

}  // namespace shardft
