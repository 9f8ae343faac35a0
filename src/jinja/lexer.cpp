// Jinja lexing (jinja_lexer.hpp), following jinja2's lexer rules for whitespace control.
#include "jinja/lexer.hpp"

#include <algorithm>
#include <cstdlib>

#include "jinja/value.hpp"
#include "io/data_error.hpp"

namespace shardft::jinja {

void syntax_error(const std::string& origin, Position at, const std::string& message) {
  throw DataError(origin + ", line " + std::to_string(at.line) + " column " + std::to_string(at.column) + ": " +
                  message);
}

std::string describe(const Token& token) {
  switch (token.kind) {
    case Token::Kind::text: return "template text";
    case Token::Kind::var_begin: return "'{{'";
    case Token::Kind::var_end: return "'}}'";
    case Token::Kind::block_begin: return "'{%'";
    case Token::Kind::block_end: return "'%}'";
    case Token::Kind::name: return "'" + token.text + "'";
    case Token::Kind::string: return "a string";
    case Token::Kind::integer:
    case Token::Kind::floating: return "a number";
    case Token::Kind::op: return "'" + token.text + "'";
    case Token::Kind::eof: return "the end of the template";
  }
  return "?";
}

namespace {

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }
bool digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  Lexer(std::string source, const std::string& origin) : src_(std::move(source)), origin_(origin) {
    for (std::size_t k = 0; k < src_.size(); ++k) {
      if (src_[k] == '\n') line_starts_.push_back(k + 1);
    }
  }

  std::vector<Token> run() {
    std::size_t pos = 0;
    bool line_starting = true;  // the previous tag's end was the end of a line (or nothing came yet)
    while (pos < src_.size()) {
      const std::size_t tag = find_tag(pos);
      std::string text = src_.substr(pos, tag - pos);
      if (tag == std::string::npos) {
        push_text(std::move(text), pos);
        break;
      }
      const char kind = src_[tag + 1];
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      if (sign == '-') {
        text = strip_text(text, false, true);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks: blocks and comments, not {{ }}
        const std::size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() &&
            strip_text(text.substr(l_pos), true, false).empty()) {
          text.resize(l_pos);
        }
      }
      push_text(std::move(text), pos);
      std::size_t p = tag + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        const std::size_t end = src_.find("#}", p);
        if (end == std::string::npos) syntax_error(origin_, at(tag), "the comment is not closed (missing '#}')");
        const char before = end > p ? src_[end - 1] : 0;
        pos = after_tag(end + 2, before == '-', before == '+');
      } else {
        out_.push_back(token(kind == '{' ? Token::Kind::var_begin : Token::Kind::block_begin, "", tag));
        pos = lex_tag(p, kind == '{' ? "}}" : "%}", tag);
      }
      line_starting = pos > 0 && src_[pos - 1] == '\n';
    }
    out_.push_back(token(Token::Kind::eof, "", src_.size()));
    return std::move(out_);
  }

 private:
  Position at(std::size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const std::size_t line_start = *(it - 1);
    return {static_cast<int>(it - line_starts_.begin()), static_cast<int>(offset - line_start + 1)};
  }
  Token token(Token::Kind kind, std::string text, std::size_t offset) const {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.at = at(offset);
    return t;
  }
  void push_text(std::string text, std::size_t offset) {
    if (!text.empty()) out_.push_back(token(Token::Kind::text, std::move(text), offset));
  }
  std::size_t find_tag(std::size_t pos) const {
    for (std::size_t k = src_.find('{', pos); k != std::string::npos; k = src_.find('{', k + 1)) {
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    }
    return std::string::npos;
  }
  // Past a tag's end at `pos`: `-` strips the whitespace after it; trim_blocks drops one newline
  // after a block or comment tag unless `+` keeps it.
  std::size_t after_tag(std::size_t pos, bool minus, bool plus, bool is_variable = false) const {
    if (minus) {
      const std::string rest = src_.substr(pos);
      return src_.size() - strip_text(rest, true, false).size();
    }
    if (!plus && !is_variable && pos < src_.size() && src_[pos] == '\n') return pos + 1;
    return pos;
  }

  // The expression tokens of one {{ }} or {% %} tag starting at p; returns the offset after its end.
  std::size_t lex_tag(std::size_t p, const std::string& end, std::size_t tag_start) {
    std::vector<char> brackets;
    const bool variable = end == "}}";
    for (;;) {
      while (p < src_.size() && ascii_space(src_[p])) ++p;
      if (p >= src_.size()) {
        syntax_error(origin_, at(tag_start), std::string("the tag is not closed (missing '") + end + "')");
      }
      if (brackets.empty()) {
        const bool minus = src_.compare(p, 1 + end.size(), "-" + end) == 0;
        const bool plus = !variable && src_.compare(p, 1 + end.size(), "+" + end) == 0;
        if (minus || plus || src_.compare(p, end.size(), end) == 0) {
          out_.push_back(token(variable ? Token::Kind::var_end : Token::Kind::block_end, "", p));
          return after_tag(p + end.size() + (minus || plus ? 1 : 0), minus, plus, variable);
        }
      }
      const char c = src_[p];
      if (name_start(c)) {
        std::size_t e = p;
        while (e < src_.size() && name_char(src_[e])) ++e;
        out_.push_back(token(Token::Kind::name, src_.substr(p, e - p), p));
        p = e;
      } else if (digit(c)) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                           "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (src_.compare(p, std::char_traits<char>::length(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (!op) syntax_error(origin_, at(p), std::string("unexpected character '") + c + "'");
        const std::string o(op);
        if (o == "(" || o == "[" || o == "{") brackets.push_back(o[0]);
        if (o == ")" || o == "]" || o == "}") {
          const char open = o == ")" ? '(' : o == "]" ? '[' : '{';
          if (brackets.empty() || brackets.back() != open) syntax_error(origin_, at(p), "unexpected '" + o + "'");
          brackets.pop_back();
        }
        out_.push_back(token(Token::Kind::op, o, p));
        p += o.size();
      }
    }
  }

  std::size_t lex_number(std::size_t p) {
    std::size_t e = p;
    auto digits = [&] {
      while (e < src_.size() && (digit(src_[e]) || (src_[e] == '_' && e + 1 < src_.size() && digit(src_[e + 1])))) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && digit(src_[e + 1])) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      std::size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && digit(src_[x])) {
        e = x;
        digits();
        is_float = true;
      }
    }
    std::string text = src_.substr(p, e - p);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Token t = token(is_float ? Token::Kind::floating : Token::Kind::integer, text, p);
    if (is_float) {
      t.floating = std::strtod(text.c_str(), nullptr);  // as Python's float(): 1e999 is inf, 1e-999 is 0.0
    } else {
      try {
        t.integer = std::stoll(text);
      } catch (const std::out_of_range&) {
        syntax_error(origin_, at(p), "the integer " + text + " does not fit in 64 bits");
      }
    }
    out_.push_back(t);
    return e;
  }

  // A quoted string with Python's escapes (\n \t \r \\ \' \" \xhh \uXXXX \UXXXXXXXX, octal, ...).
  std::size_t lex_string(std::size_t p) {
    const char quote = src_[p];
    std::string value;
    std::size_t k = p + 1;
    auto hex = [&](std::size_t n) {
      if (k + n > src_.size()) syntax_error(origin_, at(k), "a truncated \\x, \\u or \\U escape");
      char32_t cp = 0;
      for (std::size_t j = 0; j < n; ++j) {
        const char h = src_[k + j];
        const int v = digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (v < 0) syntax_error(origin_, at(k + j), "a bad hexadecimal digit in an escape");
        cp = cp * 16 + static_cast<char32_t>(v);
      }
      k += n;
      append_utf8(cp, value);
    };
    for (;;) {
      if (k >= src_.size()) syntax_error(origin_, at(p), "the string is not closed");
      const char c = src_[k];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++k;
        continue;
      }
      if (k + 1 >= src_.size()) syntax_error(origin_, at(p), "the string is not closed");
      const char e = src_[k + 1];
      k += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int n = 0; n < 2 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++n) cp = cp * 8 + (src_[k++] - '0');
            append_utf8(cp, value);
          } else {
            value += '\\';
            value += e;
          }
      }
    }
    out_.push_back(token(Token::Kind::string, value, p));
    return k + 1;
  }

  std::string src_;
  const std::string& origin_;
  std::vector<std::size_t> line_starts_{0};
  std::vector<Token> out_;
};

// jinja2 reads templates with universal newlines and, by default, without their final newline.
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (std::size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      out += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      out += source[k];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> lex(const std::string& source, const std::string& origin) {
  return Lexer(normalize_newlines(source), origin).run();
}

}  // namespace shardft::jinja
