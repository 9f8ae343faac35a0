#pragma once
// Building blocks of the byte-level BPE tokenizer (data/bpe_tokenizer.hpp), shared by its source files
// and the tests: UTF-8 helpers, GPT-2's byte <-> unicode map, NFC with an offset map, the PCRE2 splitter,
// the merge model and its word cache. Not part of the data/ interface.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct pcre2_real_code_8;  // pcre2.h, kept out of this header

namespace shardft::bpe {

// ---- UTF-8 -----------------------------------------------------------------------------------
// Offset of the first byte that does not start a well-formed UTF-8 sequence; npos when s is valid.
std::size_t find_invalid_utf8(std::string_view s);
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
// False when `in` is already NFC (out and map untouched). Otherwise out = NFC(in) and map holds
// out.size() + 1 offsets into `in`: map[k] for each byte k of out, map[out.size()] == in.size(). Inside a
// run that NFC rewrote, every offset but the run's first maps to the end of the run in `in`.
bool nfc(std::string_view in, std::string& out, std::vector<std::uint32_t>& map);

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
  std::array<std::int32_t, 256> byte_id{};  // id of the one-byte token of each byte, -1 when missing
  MergeMap merges;
  bool ignore_merges = false;
  std::unordered_map<std::string, std::int32_t> word_ids;  // raw bytes of every byte-level vocab token
  std::int32_t unk_id = -1;  // -1: unknown bytes are dropped (as HF does without an unk_token)
  bool fuse_unk = false;

  // One pre-token (raw bytes) to ids, appended with the bytes each covers (they add up to word.size()
  // unless bytes were dropped). With ignore_merges a word that is itself in the vocab is one token.
  // Otherwise HF's algorithm: a heap of adjacent pairs ordered by (rank, position).
  void tokenize(std::string_view word, MergeScratch& scratch, std::vector<std::int32_t>& ids,
                std::vector<std::uint32_t>& lens) const;
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

struct BpeSpec {
  BpeModel model;
  std::vector<AddedToken> added;               // in file order
  bool nfc = false;                            // normalizer NFC
  std::vector<std::unique_ptr<Regex>> splits;  // the Split steps, in order (behavior Isolated)
  bool prefix_space = false;                   // ByteLevel add_prefix_space
  std::unique_ptr<Regex> byte_level_regex;     // ByteLevel use_regex: the GPT-2 regex
  std::vector<std::string> decode_bytes;       // per id: what the ByteLevel decoder makes of its token
  std::vector<std::uint8_t> id_kind;           // per id: 0 no token, 1 token, 2 special added token
  int vocab_size = 0;                          // highest id + 1
};

// Parses and checks a tokenizer.json (`file` names it in errors). Throws DataError naming the file,
// the JSON key and what is supported.
BpeSpec read_bpe_spec(const std::string& file, const std::string& content);

}  // namespace shardft::bpe
