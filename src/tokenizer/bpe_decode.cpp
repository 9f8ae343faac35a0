// The decoder steps of SentencePiece-style tokenizer.json files (Llama 2, Mistral: Replace "▁" -> " ",
// ByteFallback, Fuse, Strip; or Metaspace), each doing to the list of token strings what HF's decode_chain
// does.
#include "tokenizer/bpe_internal.hpp"

namespace shardft::bpe {
namespace {

// Rust's u8::from_str_radix(s, 16) on two characters: two hex digits, or '+' and one.
int hex_byte(char a, char b) {
  const auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (a == '+') return digit(b);
  const int hi = digit(a), lo = digit(b);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// The byte a "<0xNN>" token stands for, -1 for any other token.
int fallback_byte(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  return hex_byte(token[3], token[4]);
}

// Bytes of consecutive <0xNN> tokens become one string when they are valid UTF-8, else one U+FFFD each.
void flush_bytes(std::string& bytes, std::vector<std::string>& out) {
  if (bytes.empty()) return;
  if (find_invalid_utf8(bytes) == std::string_view::npos) {
    out.push_back(bytes);
  } else {
    out.insert(out.end(), bytes.size(), "\xef\xbf\xbd");
  }
  bytes.clear();
}

// The same, appended to the fused text.
void flush_bytes(std::string& bytes, std::string& text) {
  if (bytes.empty()) return;
  if (find_invalid_utf8(bytes) == std::string_view::npos) {
    text += bytes;
  } else {
    for (std::size_t i = 0; i < bytes.size(); ++i) text += "\xef\xbf\xbd";
  }
  bytes.clear();
}

std::string replace_all(const std::string& token, const std::string& pattern, const std::string& content) {
  std::size_t hit = token.find(pattern);
  if (hit == std::string::npos) return token;
  std::string out;
  std::size_t at = 0;
  for (; hit != std::string::npos; hit = token.find(pattern, at)) {
    out.append(token, at, hit - at);
    out += content;
    at = hit + pattern.size();
  }
  out.append(token, at, std::string::npos);
  return out;
}

// Up to `start` leading and `stop` trailing characters equal to c removed. HF fails when the two cuts
// cross (a token of only c with start and stop both set); this gives the empty string then.
std::string strip(const std::string& token, char32_t c, std::size_t start, std::size_t stop) {
  std::size_t begin = 0, end = token.size();
  for (std::size_t n = 0; n < start && begin < token.size(); ++n) {
    std::size_t i = begin;
    if (next_code_point(token, i) != c) break;
    begin = i;
  }
  for (std::size_t n = 0; n < stop && end > 0; ++n) {
    std::size_t i = end;
    if (prev_code_point(token, i) != c) break;
    end = i;
  }
  return begin >= end ? std::string() : token.substr(begin, end - begin);
}

}  // namespace

std::string decode_token(const DecoderStep& step, std::string token) {
  if (step.kind == DecoderStep::Kind::replace) return replace_all(token, step.pattern, step.content);
  return strip(token, step.strip_char, step.strip_start, step.strip_stop);
}

void apply_decoder_step(const DecoderStep& step, std::vector<std::string>& tokens) {
  switch (step.kind) {
    case DecoderStep::Kind::replace:
    case DecoderStep::Kind::strip:
      for (std::string& t : tokens) t = decode_token(step, std::move(t));
      return;
    case DecoderStep::Kind::fuse: {
      std::string all;
      for (const std::string& t : tokens) all += t;
      tokens.assign(1, std::move(all));
      return;
    }
    case DecoderStep::Kind::byte_fallback: {
      std::vector<std::string> out;
      out.reserve(tokens.size());
      std::string bytes;
      for (std::string& t : tokens) {
        const int b = fallback_byte(t);
        if (b >= 0) {
          bytes += static_cast<char>(b);
          continue;
        }
        flush_bytes(bytes, out);
        out.push_back(std::move(t));
      }
      flush_bytes(bytes, out);
      tokens.swap(out);
      return;
    }
    case DecoderStep::Kind::metaspace:
      // Each replacement becomes a space, except that the first token loses all of its own when the
      // pre-tokenizer prepends one (HF drops them rather than only the leading one).
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const bool drop = i == 0 && step.metaspace_prepend;
        tokens[i] = replace_all(tokens[i], step.content, drop ? "" : " ");
      }
      return;
  }
}

std::string decode_tokens(const std::vector<DecoderStep>& steps, const std::vector<std::string_view>& tokens,
                          bool no_decoder) {
  std::vector<std::string> pieces;
  // Llama 2's chain: [ByteFallback,] Fuse, then steps on the one fused string. Streamed into that string
  // rather than through a list of token strings.
  const bool fallback = !steps.empty() && steps[0].kind == DecoderStep::Kind::byte_fallback;
  const std::size_t fuse = fallback ? 1 : 0;
  if (fuse < steps.size() && steps[fuse].kind == DecoderStep::Kind::fuse) {
    std::string text, bytes;
    for (const std::string_view t : tokens) {
      const int b = fallback ? fallback_byte(t) : -1;
      if (b >= 0) {
        bytes += static_cast<char>(b);
        continue;
      }
      flush_bytes(bytes, text);
      text += t;
    }
    flush_bytes(bytes, text);
    pieces.assign(1, std::move(text));
    for (std::size_t k = fuse + 1; k < steps.size(); ++k) apply_decoder_step(steps[k], pieces);
  } else {
    pieces.assign(tokens.begin(), tokens.end());
    for (const DecoderStep& step : steps) apply_decoder_step(step, pieces);
  }
  std::string out;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0 && no_decoder) out += ' ';  // HF joins with spaces when there is no decoder
    out += pieces[i];
  }
  return out;
}

}  // namespace shardft::bpe
