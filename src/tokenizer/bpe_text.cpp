// Text handling for the byte-level BPE tokenizer: UTF-8, GPT-2's byte alphabet, Unicode classes and NFC
// (ICU), and regex splitting (PCRE2).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/edits.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "io/data_error.hpp"
#include "io/utf8.hpp"
#include "tokenizer/bpe_internal.hpp"

namespace shardft::bpe {

// ---- UTF-8 -----------------------------------------------------------------------------------

bool is_ascii(std::string_view s) {
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (w & 0x8080808080808080ull) return false;
  }
  for (; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) >= 0x80) return false;
  }
  return true;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  char32_t cp = b0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += len;
  return cp;
}

char32_t prev_code_point(std::string_view s, std::size_t& i) {
  std::size_t j = i - 1;
  while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
  i = j;
  std::size_t k = j;
  return next_code_point(s, k);
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const int len = utf8_sequence_length(bytes, i);
    if (len > 0) {
      out.append(bytes.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += -len;
    }
  }
}

// ---- GPT-2 byte-level alphabet ---------------------------------------------------------------

namespace {

struct ByteAlphabet {
  std::array<char32_t, 256> to_char{};
  std::array<std::int16_t, 512> to_byte{};  // every byte character is below U+0200
  ByteAlphabet() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      to_byte[to_char[b]] = static_cast<std::int16_t>(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

char32_t byte_to_char(unsigned char b) { return alphabet().to_char[b]; }

int char_to_byte(char32_t c) { return c < 512 ? alphabet().to_byte[c] : -1; }

bool byte_level_bytes(std::string_view token, std::string& bytes) {
  bytes.clear();
  if (find_invalid_utf8(token) != std::string_view::npos) return false;
  for (std::size_t i = 0; i < token.size();) {
    const int b = char_to_byte(next_code_point(token, i));
    if (b < 0) return false;
    bytes.push_back(static_cast<char>(b));
  }
  return true;
}

std::string byte_level_decode(std::string_view token) {
  std::string bytes;
  if (byte_level_bytes(token, bytes)) return bytes;
  return std::string(token);
}

// ---- Unicode classes ---------------------------------------------------------------------------

bool is_white_space(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

bool is_word_char(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || (U_GET_GC_MASK(u) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL);
}

// ---- NFC -------------------------------------------------------------------------------------

namespace {
bool utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// HF's alignment of one rewritten run: old [ss, ss + ol) of `in` became new [ds, ds + nl) of `out`. The
// i-th new code point aligns to the i-th old one (the last old one when there are fewer): a composed
// character to the code point it starts with, the marks it absorbed to nothing.
void align_rewritten_run(std::string_view in, std::string_view out, std::uint32_t ss, std::uint32_t ol,
                         std::uint32_t ds, std::uint32_t nl, Alignment& hf) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> old_points;  // [start, end) in `in`
  for (std::uint32_t k = ss; k < ss + ol; ++k) {
    if (!utf8_continuation(in[k]) || old_points.empty()) old_points.push_back({k, k + 1});
    else old_points.back().second = k + 1;
  }
  if (old_points.empty()) old_points.push_back({ss, ss});  // an insertion: it aligns to where it went
  std::size_t point = 0;
  for (std::uint32_t k = ds; k < ds + nl; ++k) {
    if (k > ds && !utf8_continuation(out[k]) && point + 1 < old_points.size()) ++point;
    hf.begin[k] = old_points[point].first;
    hf.end[k + 1] = old_points[point].second;
  }
}
}  // namespace

bool nfc(std::string_view in, std::string& out, std::vector<std::uint32_t>& map, Alignment* hf) {
  // Code points below U+0300 are NFC in any context (nothing below U+0300 composes with what precedes
  // it, and what follows would be a later code point); their UTF-8 bytes are all below 0xCC.
  bool maybe = false;
  for (char c : in) maybe |= static_cast<unsigned char>(c) >= 0xCC;
  if (!maybe) return false;
  static const icu::Normalizer2* const norm = [] {
    UErrorCode ec = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(ec);
    if (U_FAILURE(ec)) throw std::runtime_error(std::string("ICU: no NFC normalizer: ") + u_errorName(ec));
    return n;
  }();
  const icu::StringPiece src(in.data(), static_cast<std::int32_t>(in.size()));
  UErrorCode ec = U_ZERO_ERROR;
  if (norm->isNormalizedUTF8(src, ec) && U_SUCCESS(ec)) return false;
  ec = U_ZERO_ERROR;
  out.clear();
  icu::StringByteSink<std::string> sink(&out);
  icu::Edits edits;
  norm->normalizeUTF8(0, src, sink, &edits, ec);
  if (U_FAILURE(ec)) throw DataError(std::string("NFC normalization failed: ") + u_errorName(ec));
  map.assign(out.size() + 1, 0);
  if (hf) {
    hf->begin.assign(out.size() + 1, 0);
    hf->end.assign(out.size() + 1, 0);
  }
  icu::Edits::Iterator it = edits.getFineIterator();
  while (it.next(ec)) {
    const auto ss = static_cast<std::uint32_t>(it.sourceIndex()),
               ds = static_cast<std::uint32_t>(it.destinationIndex());
    const auto ol = static_cast<std::uint32_t>(it.oldLength()), nl = static_cast<std::uint32_t>(it.newLength());
    for (std::uint32_t k = 0; k < nl; ++k) map[ds + k] = it.hasChange() ? (k == 0 ? ss : ss + ol) : ss + k;
    if (!hf) continue;
    if (it.hasChange()) {
      align_rewritten_run(in, out, ss, ol, ds, nl, *hf);
    } else {
      for (std::uint32_t k = 0; k < nl; ++k) {
        hf->begin[ds + k] = ss + k;
        hf->end[ds + k + 1] = ss + k + 1;
      }
    }
  }
  map[out.size()] = static_cast<std::uint32_t>(in.size());
  if (hf) hf->begin[out.size()] = static_cast<std::uint32_t>(in.size());
  return true;
}

// ---- regex -----------------------------------------------------------------------------------

std::string onig_compatible_pattern(const std::string& p) {
  static const char* const kSpace = "\\t-\\r\\x{20}\\x{85}\\p{Z}";  // White_Space = Z + TAB..CR + NEL
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 'Q') {  // \Q...\E: literal text, copied as it is
        const std::size_t end = p.find("\\E", i + 2);
        const std::size_t stop = end == std::string::npos ? p.size() : end + 2;
        out.append(p, i, stop - i);
        i = stop - 1;
      } else if (e == 's') {
        out += in_class ? std::string(kSpace) : "[" + std::string(kSpace) + "]";
        ++i;
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kSpace) + "]";
        ++i;
      } else {
        out += c;
        out += e;
        ++i;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // "[]..." and "[^]...": the first ']' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // [:alpha:] inside a class
      const std::size_t end = p.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(p, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, bool literal) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  const std::string p = literal ? pattern : onig_compatible_pattern(pattern);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : 0u), &err, &err_off,
                        nullptr);
  if (!code_) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw std::invalid_argument(std::string(reinterpret_cast<const char*>(msg)) + " at offset " +
                                std::to_string(err_off));
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(code_); }

namespace {

// One match-data block per thread (only the whole match is read) and a JIT stack that grows past
// PCRE2's 32 KiB default for long runs of one character class.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() {
    if (!data || !stack || !context) throw std::bad_alloc();
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

}  // namespace

void Regex::split_isolated(std::string_view s, std::size_t base, std::vector<Range>& out) const {
  thread_local MatchState st;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  const std::size_t n = s.size();
  std::size_t pos = 0, prev = 0;
  while (pos <= n) {
    const int rc = jit_ ? pcre2_jit_match(code_, subject, n, pos, 0, st.data, st.context)
                        : pcre2_match(code_, subject, n, pos, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      throw DataError(std::string("tokenizer regex failed on a ") + std::to_string(n) +
                      "-byte piece: " + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const std::size_t b = ov[0], e = ov[1];
    if (b > prev) out.push_back({base + prev, base + b});
    if (e > b) out.push_back({base + b, base + e});
    prev = e;
    if (e > b) {
      pos = e;
    } else {  // empty match: search again one character further on
      if (e >= n) break;
      std::size_t next = e;
      next_code_point(s, next);
      pos = next;
    }
  }
  if (prev < n) out.push_back({base + prev, base + n});
}

std::uint64_t fnv1a64(std::string_view s, std::uint64_t h) {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace shardft::bpe
