// HF tokenizer.json BPE, the encode / decode pipeline (bpe_load.cpp reads the file): added tokens ->
// normalizer -> added tokens on the normalized text -> Split regexes -> ByteLevel (prefix space, GPT-2
// regex) or Metaspace -> BPE merges, with byte spans into the original text.
#include "tokenizer/bpe_tokenizer.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "tokenizer/bpe_internal.hpp"
#include "io/data_error.hpp"

namespace shardft {
namespace {

using bpe::AddedToken;
using bpe::AddedTokenMatcher;
using bpe::Range;

// Working memory of one encode call (one per thread).
struct EncodeScratch {
  std::vector<AddedTokenMatcher::Segment> raw_segments, norm_segments;
  std::string normalized;
  std::vector<std::uint32_t> norm_map;
  bpe::Alignment norm_hf;
  bpe::NormalizeScratch norm_scratch;
  std::vector<Range> pieces, next_pieces, words;
  std::string prefixed;
  std::string meta;  // a piece's Metaspace text, meta_map its offsets in the normalized text
  std::vector<std::uint32_t> meta_map;
  std::vector<std::size_t> meta_ends;
  std::vector<std::string_view> decoded;
  bpe::MergeScratch merge;
  std::vector<std::int32_t> word_ids;
  std::vector<std::uint32_t> word_lens;
};

class BpeTokenizer : public Tokenizer {
 public:
  BpeTokenizer(const std::string& file, const std::string& content);

  std::vector<std::int32_t> encode(const std::string& text, std::vector<TokenSpan>* spans) const override;
  std::vector<std::int32_t> encode_prefix(const std::string& text, std::size_t max_tokens,
                                          std::vector<TokenSpan>* spans) const override;
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const override;
  int vocab_size() const override { return spec_.vocab_size; }
  std::int32_t special_token_id(const std::string& content) const override {
    const auto it = added_ids_.find(content);
    return it == added_ids_.end() ? -1 : it->second;
  }
  std::string fingerprint() const override { return fingerprint_; }

 private:
  // An offset of the working (normalized) text in the original: where spans tile it (at), and where HF's
  // alignment puts a span that starts (hf_begin) or ends (hf_end) there (bpe::Alignment).
  struct Offset {
    std::size_t at, hf_begin, hf_end;
  };
  // One call's state: the output and where the cache is (null when another thread holds it).
  struct Run {
    std::vector<std::int32_t>& ids;
    std::vector<TokenSpan>* spans;
    bpe::WordCache* cache;
    EncodeScratch& scratch;
    std::string_view text;  // the original
    std::size_t last_end = 0;
    std::size_t max_tokens = SIZE_MAX;  // encode_prefix: stop at the next word boundary once this many
    bool full() const { return ids.size() >= max_tokens; }
    bool inside_char(std::size_t x) const {
      return x > 0 && x < text.size() && (static_cast<unsigned char>(text[x]) & 0xC0) == 0x80;
    }
    void emit(std::int32_t id, std::size_t begin, std::size_t end) { emit(id, {begin, begin, begin}, {end, end, end}); }
    void emit(std::int32_t id, Offset b, Offset e) {
      ids.push_back(id);
      if (!spans) return;
      const std::size_t begin = std::max(b.at, last_end);  // overlapping HF segments (rstrip into a match) stay ordered
      const std::size_t end = std::max(e.at, begin);
      // HF's offsets: widened to whole characters (a byte-level token inside a character covers all of it)
      std::size_t hb = b.hf_begin, he = std::max(e.hf_end, b.hf_begin);
      const bool empty = he == hb;
      while (inside_char(hb)) --hb;
      while (!empty && inside_char(he)) ++he;
      spans->push_back({begin, end, hb, empty ? hb : he});
      last_end = end;
    }
  };
  void encode_text(Run& run, std::string_view piece, std::size_t base) const;
  // Pre-tokenizes work[r] (after the added tokens are out) and encodes each word; `orig` maps offsets
  // of `work` to the original text.
  template <class Orig>
  void pre_tokenize(Run& run, std::string_view work, Range r, const Orig& orig) const;
  // A SentencePiece-style piece: Metaspace (when there is one), then the words.
  template <class Orig>
  void pre_tokenize_chars(Run& run, std::string_view work, Range p, const Orig& orig) const;
  // A SentencePiece-style word, in parts that no token can span when the vocabulary allows it (see
  // BpeSpec::word_break): the words of Llama 2's legacy layout are whole texts, too long for the cache.
  template <class At>
  void encode_char_word(Run& run, std::string_view word, const At& at) const;
  // One word; at(v) is the offset in the original text of offset v of the word.
  template <class At>
  void encode_word(Run& run, std::string_view word, const At& at) const;
  // Byte-level: `work_begin` is the offset in `work` of the word's first real byte; `virtual_space`: the
  // word starts with a space the ByteLevel pre-tokenizer added, which covers no input byte.
  template <class Orig>
  void encode_byte_word(Run& run, std::string_view word, std::size_t work_begin, bool virtual_space,
                        const Orig& orig) const {
    encode_word(run, word, [&](std::size_t v) { return orig(work_begin + (virtual_space ? (v > 0 ? v - 1 : 0) : v)); });
  }
  std::string decode_chars(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const;

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
  return encode_prefix(text, SIZE_MAX, spans);
}

// Words (the pre-tokenizer's pieces) and added tokens are encoded independently of what follows them,
// so stopping between two of them leaves the ids so far as the whole text's first ids.
std::vector<std::int32_t> BpeTokenizer::encode_prefix(const std::string& text, std::size_t max_tokens,
                                                      std::vector<TokenSpan>* spans) const {
  const std::size_t bad = bpe::find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    throw DataError("BPE tokenizer: text is not valid UTF-8 (byte " + std::to_string(bad) + " of " +
                    std::to_string(text.size()) + ")");
  }
  std::vector<std::int32_t> ids;
  const std::size_t expect = std::min(text.size() / 3 + 4, max_tokens == SIZE_MAX ? SIZE_MAX : max_tokens + 64);
  ids.reserve(expect);
  if (spans) {
    spans->clear();
    spans->reserve(expect);
  }
  std::unique_lock<std::mutex> lock(cache_mutex_, std::try_to_lock);
  EncodeScratch& sc = scratch();
  Run run{ids, spans, lock.owns_lock() ? &cache_ : nullptr, sc, text};
  run.max_tokens = max_tokens;
  if (raw_matcher_.empty()) {
    encode_text(run, text, 0);
  } else {
    sc.raw_segments.clear();
    raw_matcher_.split(text, spec_.added, sc.raw_segments);
    for (const auto& seg : sc.raw_segments) {
      if (run.full()) break;
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
  const bpe::Alignment* hf = nullptr;
  if (bpe::normalize(spec_.normalizer, piece, sc.normalized, sc.norm_map, sc.norm_scratch,
                     run.spans ? &sc.norm_hf : nullptr)) {
    work = sc.normalized;
    map = sc.norm_map.data();
    if (run.spans) hf = &sc.norm_hf;
  }
  const auto orig = [base, map, hf](std::size_t x) {
    return Offset{base + (map ? map[x] : x), base + (hf ? hf->begin[x] : x), base + (hf ? hf->end[x] : x)};
  };
  if (norm_matcher_.empty()) {
    if (!work.empty()) pre_tokenize(run, work, {0, work.size()}, orig);
    return;
  }
  sc.norm_segments.clear();
  norm_matcher_.split(work, spec_.added, sc.norm_segments);
  for (const auto& seg : sc.norm_segments) {
    if (run.full()) break;
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
  if (!spec_.byte_level) {
    for (const Range& p : pieces) {
      if (run.full()) break;
      pre_tokenize_chars(run, work, p, orig);
    }
    return;
  }
  for (const Range& p : pieces) {  // the ByteLevel step
    if (run.full()) break;
    const std::string_view s = work.substr(p.begin, p.end - p.begin);
    if (spec_.prefix_space && s[0] != ' ') {
      sc.prefixed.assign(1, ' ');
      sc.prefixed.append(s.data(), s.size());
      const std::string_view pre = sc.prefixed;
      if (!spec_.byte_level_regex) {
        encode_byte_word(run, pre, p.begin, true, orig);
        continue;
      }
      sc.words.clear();
      spec_.byte_level_regex->split_isolated(pre, 0, sc.words);
      for (const Range& w : sc.words) {
        if (run.full()) break;
        const std::string_view word = pre.substr(w.begin, w.end - w.begin);
        if (w.begin == 0) {
          encode_byte_word(run, word, p.begin, true, orig);
        } else {
          encode_byte_word(run, word, p.begin + w.begin - 1, false, orig);
        }
      }
    } else if (spec_.byte_level_regex) {
      sc.words.clear();
      spec_.byte_level_regex->split_isolated(s, p.begin, sc.words);
      for (const Range& w : sc.words) {
        if (run.full()) break;
        encode_byte_word(run, work.substr(w.begin, w.end - w.begin), w.begin, false, orig);
      }
    } else {
      encode_byte_word(run, s, p.begin, false, orig);
    }
  }
}

template <class Orig>
void BpeTokenizer::pre_tokenize_chars(Run& run, std::string_view work, Range p, const Orig& orig) const {
  const std::string_view s = work.substr(p.begin, p.end - p.begin);
  if (!spec_.has_metaspace) {
    encode_char_word(run, s, [&](std::size_t v) { return orig(p.begin + v); });
    return;
  }
  EncodeScratch& sc = run.scratch;
  // HF's prepend_scheme "first" asks whether the piece begins the input: after an added token it does not.
  bpe::metaspace(spec_.metaspace, s, orig(p.begin).at == 0, p.begin, sc.meta, sc.meta_map, sc.meta_ends);
  std::size_t begin = 0;
  for (const std::size_t end : sc.meta_ends) {
    if (run.full()) break;
    encode_char_word(run, std::string_view(sc.meta).substr(begin, end - begin),
                     [&](std::size_t v) { return orig(sc.meta_map[begin + v]); });
    begin = end;
  }
}

template <class At>
void BpeTokenizer::encode_char_word(Run& run, std::string_view word, const At& at) const {
  const std::string& brk = spec_.word_break;
  std::size_t begin = 0;
  if (!brk.empty()) {
    for (std::size_t hit = word.find(brk, 1); hit != std::string_view::npos; hit = word.find(brk, hit + brk.size())) {
      if (hit >= brk.size() && word.compare(hit - brk.size(), brk.size(), brk) == 0) continue;  // inside a run
      encode_word(run, word.substr(begin, hit - begin), [&](std::size_t v) { return at(begin + v); });
      begin = hit;
      if (run.full()) return;  // the parts encode independently: the ids so far are final
    }
  }
  encode_word(run, word.substr(begin), [&](std::size_t v) { return at(begin + v); });
}

template <class At>
void BpeTokenizer::encode_word(Run& run, std::string_view word, const At& at) const {
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
  if (!run.spans) {  // ids only: no offsets to map
    run.ids.insert(run.ids.end(), ids, ids + n);
    return;
  }
  std::size_t v = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t b = v;
    v += lens[k];
    run.emit(ids[k], at(b), at(v));
  }
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  if (!spec_.byte_level) return decode_chars(ids, skip_special_tokens);
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

std::string BpeTokenizer::decode_chars(const std::vector<std::int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string_view>& tokens = scratch().decoded;
  tokens.clear();
  for (std::int32_t id : ids) {
    if (id < 0 || id >= spec_.vocab_size) continue;
    const std::uint8_t kind = spec_.id_kind[id];
    if (kind == 0 || (kind == 2 && skip_special_tokens)) continue;
    tokens.push_back(spec_.decode_bytes[id]);
  }
  return bpe::decode_tokens(spec_.decoder, tokens, spec_.no_decoder);
}

BpeTokenizer::BpeTokenizer(const std::string& file, const std::string& content)
    : spec_(bpe::read_bpe_spec(file, content)) {
  std::ostringstream hash;
  hash << std::hex << std::setw(16) << std::setfill('0') << bpe::fnv1a64(content);
  fingerprint_ = "bpe:" + file + ":" + hash.str();
  std::string normalized;
  std::vector<std::uint32_t> unused_map;
  bpe::NormalizeScratch norm_scratch;
  for (std::size_t i = 0; i < spec_.added.size(); ++i) {
    const AddedToken& t = spec_.added[i];
    added_ids_[t.content] = t.id;
    if (!t.normalized) {
      raw_matcher_.add(t.content, static_cast<int>(i));
    } else if (bpe::normalize(spec_.normalizer, t.content, normalized, unused_map, norm_scratch)) {
      // Matched in normalized text, so normalized too (as HF does: with Prepend "▁", "x" becomes "▁x").
      norm_matcher_.add(normalized, static_cast<int>(i));
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
      // A from-scratch run's output_dir is such a directory: the byte tokenizer has no file to copy.
      throw DataError(path + ": no tokenizer.json in this directory (expected an HF tokenizer directory; a model "
                      "trained from scratch with the built-in byte tokenizer needs tokenizer_name_or_path: byte)");
    }
  } else if (!fs::exists(path, ec)) {
    throw DataError(path + ": no such file (expected \"byte\", a tokenizer.json file or a directory holding one)");
  }
  return std::make_unique<BpeTokenizer>(file, read_file(file));
}

std::unique_ptr<Tokenizer> parse_bpe_tokenizer(const std::string& content, const std::string& file) {
  return std::make_unique<BpeTokenizer>(file, content);
}

}  // namespace shardft
