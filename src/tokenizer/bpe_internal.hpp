#pragma once
// Building blocks of the BPE tokenizer (tokenizer/bpe_tokenizer.hpp), shared by its source files and the
// tests: UTF-8 helpers, GPT-2's byte <-> unicode map, normalizers with an offset map, the PCRE2 splitter,
// the merge model and its word cache, the added-token matcher, the decoders. Not part of the tokenizer/
// interface.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/utf8.hpp"

struct pcre2_real_code_8;  // pcre2.h, kept out of this header

namespace shardft::bpe {

// ---- UTF-8 -----------------------------------------------------------------------------------
using shardft::find_invalid_utf8;  // io/utf8.hpp
bool is_ascii(std::string_view s);
void append_utf8(char32_t cp, std::string& out);
// The code point starting at s[i] (s valid UTF-8); moves i past it.
char32_t next_code_point(std::string_view s, std::size_t& i);
// The code point ending at s[i] (i > 0, s valid UTF-8); moves i to its first byte.
char32_t prev_code_point(std::string_view s, std::size_t& i);
// Appends bytes as UTF-8, each maximal ill-formed subsequence replaced by U+FFFD (Rust's from_utf8_lossy).
void append_utf8_lossy(std::string_view bytes, std::string& out);

// ---- GPT-2 byte-level alphabet ---------------------------------------------------------------
// Printable bytes stand for themselves; the other 68 map to U+0100.. in byte order ("Ġ" is the space).
char32_t byte_to_char(unsigned char b);
int char_to_byte(char32_t c);  // -1 when c stands for no byte
// The bytes a vocab token stands for, when every character of it is a byte character.
bool byte_level_bytes(std::string_view token, std::string& bytes);
// What HF's ByteLevel decoder makes of one token: its bytes, or the token's own UTF-8 when some
// character is not a byte character (added tokens such as " hé").
std::string byte_level_decode(std::string_view token);

// ---- Unicode classes HF uses around added tokens (Rust regex \w and \s) -------------------------
bool is_white_space(char32_t c);  // White_Space
bool is_word_char(char32_t c);    // Alphabetic, marks, Nd, Pc, Join_Control

// ---- NFC -------------------------------------------------------------------------------------
// HF's alignment of a normalized text to its input (tokenizers' NormalizedString): begin[x] is where in
// the input a span of the normalized text that starts at x starts, end[x] where one that ends at x
// (exclusive) ends; x in [0, normalized size]. A character NFC composed from several code points aligns
// to its first one: the combining marks it absorbed belong to no span. Elsewhere begin and end are the
// tiling map itself.
struct Alignment {
  std::vector<std::uint32_t> begin, end;
};

// False when `in` is already NFC (out and map untouched). Otherwise out = NFC(in) and map holds
// out.size() + 1 offsets into `in`: map[k] for each byte k of out, map[out.size()] == in.size(). Inside a
// run that NFC rewrote, every offset but the run's first maps to the end of the run in `in` (spans tile
// the input). `hf`, when given, receives HF's alignment.
bool nfc(std::string_view in, std::string& out, std::vector<std::uint32_t>& map, Alignment* hf = nullptr);

// ---- regex splitting (PCRE2) -------------------------------------------------------------------
struct Range {
  std::size_t begin = 0, end = 0;
};

// The pattern with \s and \S spelled out as Unicode White_Space, which is what Oniguruma's \s matches
// (PCRE2 also counts U+180E). Other syntax is left as it is.
std::string onig_compatible_pattern(const std::string& pattern);

class Regex {
 public:
  // UTF + UCP mode; `literal`: the pattern is a plain string (HF's {"String": ...}). Throws
  // std::invalid_argument with PCRE2's message and the offset when it does not compile.
  Regex(const std::string& pattern, bool literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // HF's Split with behavior Isolated: appends the matches and the text between them, non-empty
  // pieces only, as offsets into s shifted by `base`. s must be valid UTF-8.
  void split_isolated(std::string_view s, std::size_t base, std::vector<Range>& out) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

// ---- the merge model ---------------------------------------------------------------------------
// (left id, right id) -> (rank, merged id), open addressing.
class MergeMap {
 public:
  void reserve(std::size_t n);
  void insert(std::int32_t left, std::int32_t right, std::uint32_t rank, std::int32_t merged);  // later wins
  // The merge of (left, right), or nullptr.
  struct Value {
    std::uint32_t rank;
    std::int32_t merged;
  };
  const Value* find(std::int32_t left, std::int32_t right) const;
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t key;
    Value value;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  void grow();
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

// Per-thread working memory of BpeModel::tokenize.
struct MergeScratch {
  struct Symbol {
    std::int32_t id;
    std::int32_t prev, next;
    std::uint32_t len;  // bytes of the word this symbol covers; 0 once merged into its left neighbour
  };
  struct Candidate {
    std::uint32_t rank, pos;
    std::int32_t merged;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

struct BpeModel {
  // Byte-level (GPT-2 alphabet): a word's symbols are its bytes. Otherwise (SentencePiece style) they are
  // its Unicode characters, each a vocab token of one character, else its <0xNN> byte tokens
  // (byte_fallback), else unk.
  bool byte_level = true;
  std::array<std::int32_t, 256> byte_id{};   // byte-level: id of the one-byte token of each byte, -1 when missing
  std::array<std::int32_t, 128> ascii_id{};  // characters: id of each one-character ASCII token
  std::unordered_map<char32_t, std::int32_t> char_id;  // characters: the other one-character tokens
  bool byte_fallback = false;
  std::array<std::int32_t, 256> fallback_id{};  // characters: id of "<0xNN>", -1 when missing
  MergeMap merges;
  bool ignore_merges = false;
  // With ignore_merges, the words that are one token: raw bytes of byte-level tokens, else the tokens.
  std::unordered_map<std::string, std::int32_t> word_ids;
  std::int32_t unk_id = -1;  // -1: unknown bytes are dropped (as HF does without an unk_token)
  bool fuse_unk = false;

  // One pre-token (raw bytes, or the pre-tokenized text of a character model) to ids, appended with the
  // bytes each covers (they add up to word.size()). With ignore_merges a word that is itself in the vocab
  // is one token. Otherwise HF's algorithm: a heap of adjacent pairs ordered by (rank, position).
  void tokenize(std::string_view word, MergeScratch& scratch, std::vector<std::int32_t>& ids,
                std::vector<std::uint32_t>& lens) const;

 private:
  void byte_symbols(std::string_view word, MergeScratch& scratch) const;
  void char_symbols(std::string_view word, MergeScratch& scratch) const;
};

// Word -> (ids, byte lengths), open addressing over one key arena and one value arena; cleared when
// it holds kMaxEntries words. Words longer than kMaxWordBytes are not cached.
class WordCache {
 public:
  static constexpr std::size_t kMaxEntries = 1u << 18;
  static constexpr std::size_t kMaxWordBytes = 256;
  // On a hit, *ids and *lens point at n entries (valid until the next insert).
  bool find(std::string_view word, const std::int32_t** ids, const std::uint32_t** lens, std::size_t* n) const;
  void insert(std::string_view word, const std::int32_t* ids, const std::uint32_t* lens, std::size_t n);
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::uint64_t hash = 0;  // 0: empty
    std::uint32_t key_off = 0, key_len = 0, val_off = 0, val_len = 0;
  };
  void rehash(std::size_t n_slots);
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<std::int32_t> ids_;
  std::vector<std::uint32_t> lens_;
  std::size_t size_ = 0;
};

std::uint64_t fnv1a64(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull);

// ---- a loaded tokenizer.json -------------------------------------------------------------------
struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = true;  // HF defaults
};

// ---- normalizers (tokenizer/bpe_normalize.cpp) ------------------------------------------------------
struct NormalizerStep {
  enum class Kind { nfc, prepend, replace } kind = Kind::nfc;
  std::string pattern;  // replace: the literal string replaced
  std::string content;  // prepend: what is prepended; replace: what replaces each match
};

struct NormalizeScratch {
  std::string text;
  std::vector<std::uint32_t> map;
  Alignment hf;
};

// The steps in order, as HF's normalizer Sequence applies them. False when the text comes out as it went
// in (out and map untouched). Otherwise out and map as nfc() makes them: map[k] is the offset in `in` of
// byte k of out (map[out.size()] == in.size()); text a step inserted maps to where it was inserted, and
// inside text a step rewrote every offset but the first maps to the end of what it rewrote. `hf`, when
// given, receives HF's alignment of out to `in` through every step (nfc()'s; the other steps' is their map).
bool normalize(const std::vector<NormalizerStep>& steps, std::string_view in, std::string& out,
               std::vector<std::uint32_t>& map, NormalizeScratch& scratch, Alignment* hf = nullptr);

// HF's Metaspace pre-tokenizer: every space becomes the replacement, which is prepended (always; first:
// only to the piece that starts the input; never) unless the piece starts with it; with split, each
// replacement starts a new word.
struct MetaspaceSpec {
  enum class Prepend { always, first, never };
  std::string replacement = "\xe2\x96\x81";  // U+2581
  Prepend prepend = Prepend::always;
  bool split = true;
};

// The Metaspace text of `piece` in `out`; map[k] is the offset of byte k of out in `piece`, plus `base`
// (one more entry for the end); word_ends gets the end of each word in `out`, the first begins at 0.
// `starts_input`: the piece begins at offset 0 of the text given to encode (prepend_scheme first).
void metaspace(const MetaspaceSpec& spec, std::string_view piece, bool starts_input, std::size_t base, std::string& out,
               std::vector<std::uint32_t>& map, std::vector<std::size_t>& word_ends);

// ---- decoders of SentencePiece-style tokenizers (tokenizer/bpe_decode.cpp) ------------------------------
struct DecoderStep {
  enum class Kind { replace, byte_fallback, fuse, strip, metaspace } kind = Kind::fuse;
  std::string pattern, content;  // replace: literal pattern -> content; metaspace: content = replacement
  char32_t strip_char = U' ';
  std::size_t strip_start = 0, strip_stop = 0;
  bool metaspace_prepend = true;  // metaspace: prepend_scheme is not "never"
  // Replace and Strip see one token at a time, so a run of them can be applied to each vocab entry once.
  bool per_token() const { return kind == Kind::replace || kind == Kind::strip; }
};

// HF's decode of the token strings: the steps, then the pieces joined (with spaces when there is no
// decoder at all).
std::string decode_tokens(const std::vector<DecoderStep>& steps, const std::vector<std::string_view>& tokens,
                          bool no_decoder);
// Applies one step to the token strings, as HF's decode_chain does.
void apply_decoder_step(const DecoderStep& step, std::vector<std::string>& tokens);
// One token through a per_token() step.
std::string decode_token(const DecoderStep& step, std::string token);

// ---- added tokens (tokenizer/bpe_added_tokens.cpp) ----------------------------------------------------
// Leftmost-longest matching of a set of strings (a byte trie), then HF's single_word / lstrip / rstrip
// rules on each match (AddedVocabulary::find_matches).
class AddedTokenMatcher {
 public:
  struct Segment {
    std::size_t begin, end;
    int token;  // index into the added tokens, -1 for plain text
  };
  bool empty() const { return nodes_.size() == 1; }
  void add(const std::string& content, int token);
  // Appends the segments of s (offsets into s); nothing for an empty s.
  void split(std::string_view s, const std::vector<AddedToken>& tokens, std::vector<Segment>& out) const;

 private:
  struct Node {
    int token = -1;
    std::vector<std::pair<unsigned char, int>> kids;  // sorted by byte
  };
  int find_child(int node, unsigned char c) const;
  std::vector<Node> nodes_{1};
  std::array<bool, 256> first_{};
  int only_first_ = -1;  // the one first byte all tokens share, else -1
};

// ---- a loaded tokenizer.json -------------------------------------------------------------------
struct BpeSpec {
  BpeModel model;
  std::vector<AddedToken> added;               // in file order
  std::vector<NormalizerStep> normalizer;      // in order
  std::vector<std::unique_ptr<Regex>> splits;  // the Split steps, in order (behavior Isolated)
  // Byte-level (ByteLevel pre-tokenizer and decoder) or SentencePiece style (Unicode characters).
  bool byte_level = true;
  bool prefix_space = false;                // ByteLevel add_prefix_space
  std::unique_ptr<Regex> byte_level_regex;  // ByteLevel use_regex: the GPT-2 regex
  bool has_metaspace = false;               // SentencePiece style: the Metaspace pre-tokenizer
  MetaspaceSpec metaspace;
  // SentencePiece style: the decoder steps after the leading per-token ones (those are in decode_bytes);
  // no decoder at all joins the tokens with spaces, as HF does.
  std::vector<DecoderStep> decoder;
  bool no_decoder = false;
  // SentencePiece style: a character c ("▁", or Metaspace's replacement) before which a word can be cut
  // without changing its tokens, empty when there is none. That holds when c is a vocab token and no vocab
  // token has c after another character (so no merge joins across the cut, and a waiting unk is flushed at
  // c as well), every character encodes to something (unk or all byte tokens: no dropped bytes to carry
  // over), and ignore_merges is off (it looks the whole word up).
  std::string word_break;
  // Per id: byte-level, what the ByteLevel decoder makes of its token; SentencePiece style, the token
  // after the decoder's leading per-token steps.
  std::vector<std::string> decode_bytes;
  std::vector<std::uint8_t> id_kind;  // per id: 0 no token, 1 token, 2 special added token
  int vocab_size = 0;                 // highest id + 1
};

// Parses and checks a tokenizer.json (`file` names it in errors). Throws DataError naming the file,
// the JSON key and what is supported.
BpeSpec read_bpe_spec(const std::string& file, const std::string& content);

}  // namespace shardft::bpe
