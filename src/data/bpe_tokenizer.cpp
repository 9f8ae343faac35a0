// HF tokenizer.json byte-level BPE: loading (with errors that name the file and the key) and the
// encode / decode pipeline: added tokens -> NFC -> added tokens on the normalized text -> Split regexes
// -> ByteLevel (prefix space, GPT-2 regex) -> BPE merges, with byte spans into the original text.
#include "data/bpe_tokenizer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "data/bpe_internal.hpp"
#include "data/sft_data.hpp"

namespace shardft {
namespace {

using json = nlohmann::json;
using bpe::Range;

struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = true;
};

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
  }
  // Appends the segments of s (offsets into s); nothing for an empty s.
  void split(std::string_view s, const std::vector<AddedToken>& tokens, std::vector<Segment>& out) const {
    const std::size_t n = s.size();
    std::size_t start_offset = 0, i = 0;
    while (i < n) {
      if (!first_[static_cast<unsigned char>(s[i])]) {
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
  int vocab_size() const override { return vocab_size_; }
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
  void encode_word(Run& run, std::string_view word, std::size_t work_begin, bool virtual_space,
                   const Orig& orig) const;

  void load(const std::string& file, const json& doc);

  std::string fingerprint_;
  bpe::BpeModel model_;
  std::vector<AddedToken> added_;
  std::unordered_map<std::string, std::int32_t> added_ids_;
  AddedTokenMatcher raw_matcher_, norm_matcher_;  // normalized=false tokens / normalized=true tokens
  bool nfc_ = false;
  std::vector<std::unique_ptr<bpe::Regex>> splits_;  // Split steps, in order
  bool prefix_space_ = false;
  std::unique_ptr<bpe::Regex> byte_level_regex_;  // ByteLevel use_regex
  std::vector<std::string> decode_bytes_;         // per id
  std::vector<std::uint8_t> id_kind_;             // per id: 0 none, 1 token, 2 special added token
  int vocab_size_ = 0;
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
    raw_matcher_.split(text, added_, sc.raw_segments);
    for (const auto& seg : sc.raw_segments) {
      if (seg.token >= 0) {
        run.emit(added_[seg.token].id, seg.begin, seg.end);
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
  if (nfc_ && !bpe::is_ascii(piece) && bpe::nfc(piece, sc.normalized, sc.norm_map)) {
    work = sc.normalized;
    map = sc.norm_map.data();
  }
  const auto orig = [base, map](std::size_t x) { return base + (map ? map[x] : x); };
  if (norm_matcher_.empty()) {
    if (!work.empty()) pre_tokenize(run, work, {0, work.size()}, orig);
    return;
  }
  sc.norm_segments.clear();
  norm_matcher_.split(work, added_, sc.norm_segments);
  for (const auto& seg : sc.norm_segments) {
    if (seg.token >= 0) {
      run.emit(added_[seg.token].id, orig(seg.begin), orig(seg.end));
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
  for (const auto& re : splits_) {
    sc.next_pieces.clear();
    for (const Range& p : pieces) re->split_isolated(work.substr(p.begin, p.end - p.begin), p.begin, sc.next_pieces);
    pieces.swap(sc.next_pieces);
  }
  for (const Range& p : pieces) {  // the ByteLevel step
    const std::string_view s = work.substr(p.begin, p.end - p.begin);
    if (prefix_space_ && s[0] != ' ') {
      sc.prefixed.assign(1, ' ');
      sc.prefixed.append(s.data(), s.size());
      const std::string_view pre = sc.prefixed;
      if (!byte_level_regex_) {
        encode_word(run, pre, p.begin, true, orig);
        continue;
      }
      sc.words.clear();
      byte_level_regex_->split_isolated(pre, 0, sc.words);
      for (const Range& w : sc.words) {
        const std::string_view word = pre.substr(w.begin, w.end - w.begin);
        if (w.begin == 0) {
          encode_word(run, word, p.begin, true, orig);
        } else {
          encode_word(run, word, p.begin + w.begin - 1, false, orig);
        }
      }
    } else if (byte_level_regex_) {
      sc.words.clear();
      byte_level_regex_->split_isolated(s, p.begin, sc.words);
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
    model_.tokenize(word, sc.merge, sc.word_ids, sc.word_lens);
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
    if (id < 0 || id >= vocab_size_) continue;
    const std::uint8_t kind = id_kind_[id];
    if (kind == 0 || (kind == 2 && skip_special_tokens)) continue;
    bytes += decode_bytes_[id];
  }
  if (bpe::find_invalid_utf8(bytes) == std::string_view::npos) return bytes;
  std::string text;
  bpe::append_utf8_lossy(bytes, text);
  return text;
}

// ---- loading -----------------------------------------------------------------------------------

std::string kind_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "a list";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    default: return "a number";
  }
}

std::string shown(const json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Reads one tokenizer.json, every complaint naming the file and the key.
struct Reader {
  std::string file;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw DataError(file + ": " + key + " " + what);
  }
  static const json& at(const json& obj, const char* key) {
    static const json null_value;
    const auto it = obj.find(key);
    return it == obj.end() ? null_value : *it;
  }
  const json& object(const json& obj, const std::string& path, const char* key, const std::string& expected) const {
    const json& j = at(obj, key);
    if (j.is_null()) fail(path + key, "is missing (expected " + expected + ")");
    if (!j.is_object()) fail(path + key, "is " + kind_of(j) + " (expected " + expected + ")");
    return j;
  }
  bool boolean(const json& obj, const std::string& path, const char* key, bool fallback) const {
    const json& j = at(obj, key);
    if (j.is_null()) return fallback;
    if (!j.is_boolean()) fail(path + key, "is " + kind_of(j) + " (expected true or false)");
    return j.get<bool>();
  }
  std::string type(const json& obj, const std::string& path) const {
    if (!obj.is_object()) fail(path.empty() ? "(top level)" : path.substr(0, path.size() - 1),
                               "is " + kind_of(obj) + " (expected an object with a \"type\")");
    const json& t = at(obj, "type");
    if (!t.is_string()) fail(path + "type", t.is_null() ? "is missing" : "is " + kind_of(t) + " (expected a string)");
    return t.get<std::string>();
  }
  [[noreturn]] void unsupported(const std::string& path, const std::string& type, const std::string& expected) const {
    fail(path + "type", "\"" + type + "\" is not supported (expected " + expected + ")");
  }
  // Flattens nested "Sequence"s: the steps with their key paths.
  void flatten(const json& j, const std::string& path, const char* list_key,
               std::vector<std::pair<const json*, std::string>>& steps) const {
    if (type(j, path) != "Sequence") {
      steps.emplace_back(&j, path);
      return;
    }
    const json& list = at(j, list_key);
    if (!list.is_array()) fail(path + list_key, "is " + kind_of(list) + " (expected a list)");
    for (std::size_t i = 0; i < list.size(); ++i) {
      flatten(list[i], path + list_key + "[" + std::to_string(i) + "].", list_key, steps);
    }
  }
};

std::string key_of(const std::string& path) { return path.empty() ? path : path.substr(0, path.size() - 1); }

BpeTokenizer::BpeTokenizer(const std::string& file, const std::string& content) {
  json doc;
  try {
    doc = json::parse(content);
  } catch (const json::exception& e) {
    throw DataError(file + ": not valid JSON (" + e.what() + ")");
  }
  std::ostringstream hash;
  hash << std::hex << std::setw(16) << std::setfill('0') << bpe::fnv1a64(content);
  fingerprint_ = "bpe:" + file + ":" + hash.str();
  load(file, doc);
}

void BpeTokenizer::load(const std::string& file, const json& doc) {
  const Reader rd{file};
  if (!doc.is_object()) rd.fail("(top level)", "is " + kind_of(doc) + " (expected a tokenizer.json object)");

  // -- model --
  const json& model = rd.object(doc, "", "model", "an object with \"type\": \"BPE\"");
  const std::string mtype = model.contains("type") ? rd.type(model, "model.") : "BPE";
  if (mtype != "BPE") rd.unsupported("model.", mtype, "\"BPE\"");
  const json& dropout = rd.at(model, "dropout");
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0)) {
    rd.fail("model.dropout", shown(dropout) + " is not supported (expected null: BPE dropout is for training)");
  }
  if (rd.boolean(model, "model.", "byte_fallback", false)) {
    rd.fail("model.byte_fallback", "true is not supported (expected false: byte-level BPE needs no byte fallback)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json& j = rd.at(model, key);
    if (!j.is_null() && !(j.is_string() && j.get<std::string>().empty())) {
      rd.fail(std::string("model.") + key, shown(j) + " is not supported (expected null)");
    }
  }
  model_.ignore_merges = rd.boolean(model, "model.", "ignore_merges", false);
  model_.fuse_unk = rd.boolean(model, "model.", "fuse_unk", false);

  const json& vocab = rd.object(model, "model.", "vocab", "an object of token -> id");
  std::unordered_map<std::string, std::int32_t> token_ids;
  token_ids.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const json& v = it.value();
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 0x7fffffff) {
      rd.fail("model.vocab[" + json(it.key()).dump() + "]", "is " + shown(v) + " (expected an id >= 0)");
    }
    const auto id = static_cast<std::int32_t>(v.get<std::int64_t>());
    token_ids[it.key()] = id;
  }
  const json& unk = rd.at(model, "unk_token");
  if (!unk.is_null()) {
    if (!unk.is_string()) rd.fail("model.unk_token", "is " + kind_of(unk) + " (expected null or a token)");
    const auto it = token_ids.find(unk.get<std::string>());
    if (it == token_ids.end()) rd.fail("model.unk_token", shown(unk) + " is not in model.vocab");
    model_.unk_id = it->second;
  }

  const json& merges = rd.at(model, "merges");
  if (merges.is_null()) rd.fail("model.merges", "is missing (expected a list of merges)");
  if (!merges.is_array()) rd.fail("model.merges", "is " + kind_of(merges) + " (expected a list of merges)");
  model_.merges.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const std::size_t sp = s.find(' ');
      if (sp == std::string::npos) rd.fail(key, shown(m) + " is not a merge (expected \"left right\")");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {  // ["a", "b"]
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      rd.fail(key, "is " + shown(m) + " (expected \"left right\" or [\"left\", \"right\"])");
    }
    const auto ia = token_ids.find(a), ib = token_ids.find(b), im = token_ids.find(a + b);
    if (ia == token_ids.end()) rd.fail(key, json(a).dump() + " is not in model.vocab");
    if (ib == token_ids.end()) rd.fail(key, json(b).dump() + " is not in model.vocab");
    if (im == token_ids.end()) rd.fail(key, "merged token " + json(a + b).dump() + " is not in model.vocab");
    model_.merges.insert(ia->second, ib->second, static_cast<std::uint32_t>(i), im->second);
  }

  std::string bytes;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    bpe::append_utf8(bpe::byte_to_char(static_cast<unsigned char>(b)), ch);
    const auto it = token_ids.find(ch);
    model_.byte_id[b] = it == token_ids.end() ? -1 : it->second;
  }
  if (model_.ignore_merges) {
    for (const auto& [tok, id] : token_ids) {
      if (bpe::byte_level_bytes(tok, bytes)) model_.word_ids.emplace(bytes, id);
    }
  }

  // -- normalizer --
  const json& norm = rd.at(doc, "normalizer");
  if (!norm.is_null()) {
    std::vector<std::pair<const json*, std::string>> steps;
    rd.flatten(norm, "normalizer.", "normalizers", steps);
    for (const auto& [step, path] : steps) {
      const std::string t = rd.type(*step, path);
      if (t != "NFC") rd.unsupported(path, t, "null, \"NFC\" or a \"Sequence\" of \"NFC\"");
      nfc_ = true;
    }
  }

  // -- added tokens --
  const json& added = rd.at(doc, "added_tokens");
  if (!added.is_null() && !added.is_array()) rd.fail("added_tokens", "is " + kind_of(added) + " (expected a list)");
  if (added.is_array()) {
    for (std::size_t i = 0; i < added.size(); ++i) {
      const std::string path = "added_tokens[" + std::to_string(i) + "].";
      const json& a = added[i];
      if (!a.is_object()) rd.fail(key_of(path), "is " + kind_of(a) + " (expected an object)");
      const json& id = rd.at(a, "id");
      const json& content = rd.at(a, "content");
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > 0x7fffffff) {
        rd.fail(path + "id", "is " + shown(id) + " (expected an id >= 0)");
      }
      if (!content.is_string() || content.get<std::string>().empty()) {
        rd.fail(path + "content", "is " + shown(content) + " (expected a non-empty string)");
      }
      AddedToken t;
      t.content = content.get<std::string>();
      t.id = static_cast<std::int32_t>(id.get<std::int64_t>());
      t.special = rd.boolean(a, path, "special", false);
      t.lstrip = rd.boolean(a, path, "lstrip", false);
      t.rstrip = rd.boolean(a, path, "rstrip", false);
      t.single_word = rd.boolean(a, path, "single_word", false);
      t.normalized = rd.boolean(a, path, "normalized", true);
      added_ids_[t.content] = t.id;
      added_.push_back(std::move(t));
    }
  }
  std::string normalized;
  std::vector<std::uint32_t> unused_map;
  for (std::size_t i = 0; i < added_.size(); ++i) {
    const AddedToken& t = added_[i];
    if (!t.normalized) {
      raw_matcher_.add(t.content, static_cast<int>(i));
    } else if (nfc_ && bpe::nfc(t.content, normalized, unused_map)) {
      norm_matcher_.add(normalized, static_cast<int>(i));
    } else {
      norm_matcher_.add(t.content, static_cast<int>(i));
    }
  }

  // -- pre-tokenizer: Split steps, then ByteLevel --
  const std::string byte_level_only =
      "\"ByteLevel\", or a \"Sequence\" of \"Split\" steps ending in \"ByteLevel\" (byte-level BPE)";
  const json& pre = rd.at(doc, "pre_tokenizer");
  if (pre.is_null()) rd.fail("pre_tokenizer", "is null (expected " + byte_level_only + ")");
  std::vector<std::pair<const json*, std::string>> steps;
  rd.flatten(pre, "pre_tokenizer.", "pretokenizers", steps);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const json& step = *steps[i].first;
    const std::string& path = steps[i].second;
    const std::string t = rd.type(step, path);
    const bool last = i + 1 == steps.size();
    if (t == "ByteLevel") {
      if (!last) rd.fail(key_of(path), "is ByteLevel but not the last step (expected ByteLevel last)");
      prefix_space_ = rd.boolean(step, path, "add_prefix_space", true);
      if (rd.boolean(step, path, "use_regex", true)) {
        byte_level_regex_ = std::make_unique<bpe::Regex>(
            R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", false);
      }
    } else if (t == "Split") {
      if (last) rd.fail(key_of(path), "is the last step (expected " + byte_level_only + ")");
      const json& pattern = rd.object(step, path, "pattern", "{\"Regex\": ...} or {\"String\": ...}");
      const bool literal = pattern.contains("String");
      const json& p = literal ? pattern["String"] : rd.at(pattern, "Regex");
      if (!p.is_string()) rd.fail(path + "pattern", "is " + shown(pattern) + " (expected {\"Regex\": ...} or {\"String\": ...})");
      const json& behavior = rd.at(step, "behavior");
      if (!(behavior.is_string() && behavior.get<std::string>() == "Isolated")) {
        rd.fail(path + "behavior", shown(behavior) + " is not supported (expected \"Isolated\")");
      }
      if (rd.boolean(step, path, "invert", false)) rd.fail(path + "invert", "true is not supported (expected false)");
      try {
        splits_.push_back(std::make_unique<bpe::Regex>(p.get<std::string>(), literal));
      } catch (const std::invalid_argument& e) {
        rd.fail(path + "pattern." + (literal ? "String" : "Regex"), "does not compile: " + std::string(e.what()));
      }
    } else {
      rd.unsupported(path, t, last ? byte_level_only : "\"Split\" or \"ByteLevel\"");
    }
  }

  // -- decoder: ByteLevel --
  const json& dec = rd.at(doc, "decoder");
  if (dec.is_null()) rd.fail("decoder", "is null (expected \"ByteLevel\")");
  steps.clear();
  rd.flatten(dec, "decoder.", "decoders", steps);
  for (const auto& [step, path] : steps) {
    const std::string t = rd.type(*step, path);
    if (t != "ByteLevel") rd.unsupported(path, t, "\"ByteLevel\"");
  }
  if (steps.size() != 1) rd.fail("decoder", "has " + std::to_string(steps.size()) + " steps (expected one ByteLevel)");

  // -- post-processor: accepted, never applied (add_special_tokens=False) --
  const json& post = rd.at(doc, "post_processor");
  if (!post.is_null()) {
    steps.clear();
    rd.flatten(post, "post_processor.", "processors", steps);
    for (const auto& [step, path] : steps) {
      const std::string t = rd.type(*step, path);
      if (t != "ByteLevel" && t != "TemplateProcessing" && t != "RobertaProcessing" && t != "BertProcessing") {
        rd.unsupported(path, t, "null, \"ByteLevel\", \"TemplateProcessing\", \"RobertaProcessing\", \"BertProcessing\" or a \"Sequence\" of them");
      }
    }
  }

  // -- id tables for decode --
  std::int32_t max_id = -1;
  for (const auto& [tok, id] : token_ids) max_id = std::max(max_id, id);
  for (const AddedToken& t : added_) max_id = std::max(max_id, t.id);
  vocab_size_ = max_id + 1;
  decode_bytes_.assign(vocab_size_, std::string());
  id_kind_.assign(vocab_size_, 0);
  for (const auto& [tok, id] : token_ids) {
    decode_bytes_[id] = bpe::byte_level_decode(tok);
    id_kind_[id] = 1;
  }
  for (const AddedToken& t : added_) {  // added tokens take precedence, as in HF's decode
    decode_bytes_[t.id] = bpe::byte_level_decode(t.content);
    id_kind_[t.id] = t.special ? 2 : 1;
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
