// Jinja values (jinja_value.hpp): Python's truthiness, str(), repr(), json.dumps, == and <.
#include "jinja/value.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jinja/limits.hpp"

namespace shardft::jinja {

namespace {
// One more level than the deepest element; refused beyond kMaxNesting while a template renders (a
// deeper value would be printed, compared and freed by recursion as deep). Outside a render (the
// variables a dataset gives) values pass as they are.
int depth_above(int deepest) {
  if (deepest + 1 > kMaxNesting && rendering()) {
    fail("a list or dict nested deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  return deepest + 1;
}
}  // namespace

Value Value::string(std::string s) {
  note_string(s.size());
  Value v;
  v.type = Type::string;
  v.s = std::move(s);
  return v;
}

Value Value::of_list(List items) {
  std::size_t string_bytes = 0;
  int deepest = 0;
  for (const Value& item : items) {
    string_bytes += item.s.size();
    deepest = std::max(deepest, item.depth);
  }
  note_list(items.size(), string_bytes);
  Value v;
  v.type = Type::list;
  v.depth = depth_above(deepest);
  v.list = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::of_dict(Dict d) {
  std::size_t string_bytes = 0;
  int deepest = 0;
  for (const auto& kv : d.items) {
    string_bytes += kv.first.size() + kv.second.s.size();
    deepest = std::max(deepest, kv.second.depth);
  }
  note_list(d.items.size(), string_bytes);
  Value v;
  v.type = Type::dict;
  v.depth = depth_above(deepest);
  v.dict = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::namespace_of(Dict d) {
  d.is_namespace = true;
  return of_dict(std::move(d));
}

Value Value::function(Function fn) {
  Value v;
  v.type = Type::function;
  v.fn = std::make_shared<const Function>(std::move(fn));
  return v;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& kv : items) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& kv : items) {
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

Value Args::get(std::size_t index, const std::string& name, Value fallback) const {
  if (index < positional.size()) return positional[index];
  for (const auto& kv : keyword) {
    if (kv.first == name) return kv.second;
  }
  return fallback;
}

void fail(std::string message) { throw EvalError{std::move(message)}; }

std::string type_name(const Value& v) {
  switch (v.type) {
    case Value::Type::undefined: return "undefined";
    case Value::Type::none: return "NoneType";
    case Value::Type::boolean: return "bool";
    case Value::Type::integer: return "int";
    case Value::Type::floating: return "float";
    case Value::Type::string: return "str";
    case Value::Type::list: return "list";
    case Value::Type::dict: return v.dict->is_namespace ? "Namespace" : "dict";
    case Value::Type::function: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.type) {
    case Value::Type::undefined:
    case Value::Type::none: return false;
    case Value::Type::boolean: return v.b;
    case Value::Type::integer: return v.i != 0;
    case Value::Type::floating: return v.f != 0;
    case Value::Type::string: return !v.s.empty();
    case Value::Type::list: return !v.list->empty();
    case Value::Type::dict: return v.dict->is_namespace || !v.dict->items.empty();
    case Value::Type::function: return true;
  }
  return false;
}

namespace {

// Python's repr(float): the shortest digits that read back to the same double, in exponent form
// below 1e-4 and from 1e16 on, always with a '.0' or exponent so it reads as a float.
std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[40];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  // buf is d.ddde[+-]XX: split digits and exponent, then lay out as Python's repr does.
  std::string s(buf);
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const std::size_t e = s.find('e');
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += eb;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  } else {
    const auto int_digits = static_cast<std::size_t>(exponent + 1);
    if (digits.size() <= int_digits) {
      out = digits + std::string(int_digits - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_digits) + "." + digits.substr(int_digits);
    }
  }
  return negative ? "-" + out : out;
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void json_into(const Value& v, int indent, int depth, std::string& out) {
  const ValueLevel level;  // a namespace may hold itself
  if (out.size() > kMaxStringBytes) check_string_size(out.size());
  const bool pretty = indent >= 0;
  auto newline = [&](int level) {
    if (pretty) out += "\n" + std::string(static_cast<std::size_t>(indent * level), ' ');
  };
  switch (v.type) {
    case Value::Type::none: out += "null"; return;
    case Value::Type::boolean: out += v.b ? "true" : "false"; return;
    case Value::Type::integer: out += std::to_string(v.i); return;
    case Value::Type::floating:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : float_repr(v.f);
      return;
    case Value::Type::string: out += json_string(v.s); return;
    case Value::Type::list:
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (std::size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += pretty ? "," : ", ";
        newline(depth + 1);
        json_into((*v.list)[k], indent, depth + 1, out);
      }
      newline(depth);
      out += "]";
      return;
    case Value::Type::dict:
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      out += "{";
      for (std::size_t k = 0; k < v.dict->items.size(); ++k) {
        if (k) out += pretty ? "," : ", ";
        newline(depth + 1);
        out += json_string(v.dict->items[k].first) + ": ";
        json_into(v.dict->items[k].second, indent, depth + 1, out);
      }
      newline(depth);
      out += "}";
      return;
    default: fail("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.type) {
    case Value::Type::undefined: return "";
    case Value::Type::none: return "None";
    case Value::Type::boolean: return v.b ? "True" : "False";
    case Value::Type::integer: return std::to_string(v.i);
    case Value::Type::floating: return float_repr(v.f);
    case Value::Type::string: return v.s;
    case Value::Type::list: {
      const ValueLevel level;
      std::string out = "[";
      for (std::size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      return out + "]";
    }
    case Value::Type::dict: {
      if (v.dict->is_namespace) return "<Namespace>";
      const ValueLevel level;
      std::string out = "{";
      for (std::size_t k = 0; k < v.dict->items.size(); ++k) {
        out += (k ? ", " : "") + string_repr(v.dict->items[k].first) + ": " + repr(v.dict->items[k].second);
      }
      return out + "}";
    }
    case Value::Type::function: return "<function>";
  }
  return "";
}

std::string repr(const Value& v) { return v.is_string() ? string_repr(v.s) : to_str(v); }

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_into(v, indent, 0, out);
  return out;
}

bool equal(const Value& a, const Value& b) {
  const ValueLevel level;
  if (a.is_number() && b.is_number()) {
    if (a.type == Value::Type::floating || b.type == Value::Type::floating) return a.as_double() == b.as_double();
    return (a.type == Value::Type::boolean ? a.b : a.i) == (b.type == Value::Type::boolean ? b.b : b.i);
  }
  if (a.type != b.type) return false;
  switch (a.type) {
    case Value::Type::undefined:
    case Value::Type::none: return true;
    case Value::Type::string: return a.s == b.s;
    case Value::Type::list:
      if (a.list->size() != b.list->size()) return false;
      for (std::size_t k = 0; k < a.list->size(); ++k) {
        if (!equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case Value::Type::dict:
      if (a.dict->is_namespace || b.dict->is_namespace) return a.dict == b.dict;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& kv : a.dict->items) {
        const Value* other = b.dict->find(kv.first);
        if (!other || !equal(kv.second, *other)) return false;
      }
      return true;
    default: return a.fn == b.fn;
  }
}

bool less(const Value& a, const Value& b) {
  const ValueLevel level;
  if (a.is_number() && b.is_number()) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.s < b.s;  // UTF-8 byte order is code point order
  if (a.is_list() && b.is_list()) {
    return std::lexicographical_compare(a.list->begin(), a.list->end(), b.list->begin(), b.list->end(), less);
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// ---- UTF-8 ------------------------------------------------------------------------------------------

std::vector<std::size_t> code_point_starts(const std::string& text) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  starts.push_back(text.size());
  return starts;
}

std::size_t code_point_count(const std::string& text) { return code_point_starts(text).size() - 1; }

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {
char32_t decode_at(const std::string& s, std::size_t begin, std::size_t end) {
  const auto b0 = static_cast<unsigned char>(s[begin]);
  if (end - begin == 1) return b0;
  if (end - begin > 4) return 0xFFFD;  // not UTF-8 (text from data is not checked): the replacement character
  char32_t cp = b0 & (0x7F >> (end - begin));
  for (std::size_t k = begin + 1; k < end; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[k]) & 0x3F);
  return cp;
}
}  // namespace

std::string strip_text(const std::string& text, bool left, bool right, const std::string* chars) {
  const std::vector<std::size_t> starts = code_point_starts(text);
  std::vector<char32_t> strip_set;
  if (chars) {
    const std::vector<std::size_t> cs = code_point_starts(*chars);
    for (std::size_t k = 0; k + 1 < cs.size(); ++k) strip_set.push_back(decode_at(*chars, cs[k], cs[k + 1]));
  }
  auto strips = [&](std::size_t k) {
    const char32_t c = decode_at(text, starts[k], starts[k + 1]);
    return chars ? std::find(strip_set.begin(), strip_set.end(), c) != strip_set.end() : is_python_space(c);
  };
  std::size_t first = 0, last = starts.size() - 1;
  if (left) {
    while (first < last && strips(first)) ++first;
  }
  if (right) {
    while (last > first && strips(last - 1)) --last;
  }
  return text.substr(starts[first], starts[last] - starts[first]);
}

std::string upper_ascii(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string lower_ascii(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace shardft::jinja
