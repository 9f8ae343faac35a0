// Tests, methods of strings and dicts, globals, and the Python string functions behind them
// (jinja_builtins.hpp).
#include <algorithm>
#include <ctime>
#include <map>

#include "jinja/builtins.hpp"
#include "jinja/limits.hpp"

namespace shardft::jinja {

namespace {
bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
}  // namespace

// Python's str.replace (count < 0: all).
std::string replace_all(const std::string& s, const std::string& old, const std::string& with, std::int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` around every character
    const std::vector<std::size_t> starts = code_point_starts(s);
    std::int64_t done = 0;
    for (std::size_t k = 0; k + 1 < starts.size(); ++k) {
      if (count < 0 || done++ < count) out += with;
      out += s.substr(starts[k], starts[k + 1] - starts[k]);
      check_string_size(out.size());  // before it grows past the limit by more than one piece
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  std::size_t pos = 0;
  for (std::int64_t done = 0; count < 0 || done < count; ++done) {
    const std::size_t hit = s.find(old, pos);
    if (hit == std::string::npos) break;
    out += s.substr(pos, hit - pos) + with;
    check_string_size(out.size());
    pos = hit + old.size();
  }
  return out + s.substr(pos);
}

// Python's str.split(sep=None, maxsplit=-1).
List split(const std::string& s, const std::string* sep, std::int64_t maxsplit) {
  List out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    std::size_t pos = 0;
    for (std::int64_t done = 0; maxsplit < 0 || done < maxsplit; ++done) {
      const std::size_t hit = s.find(*sep, pos);
      if (hit == std::string::npos) break;
      out.push_back(Value::string(s.substr(pos, hit - pos)));
      check_list_size(out.size());
      pos = hit + sep->size();
    }
    out.push_back(Value::string(s.substr(pos)));
    return out;
  }
  const std::vector<std::size_t> st = code_point_starts(s);
  const std::size_t n = st.size() - 1;
  auto space = [&](std::size_t k) { return strip_text(s.substr(st[k], st[k + 1] - st[k]), true, true).empty(); };
  std::size_t k = 0;
  for (std::int64_t done = 0;; ++done) {
    while (k < n && space(k)) ++k;
    if (k == n) break;
    if (maxsplit >= 0 && done >= maxsplit) {
      out.push_back(Value::string(s.substr(st[k])));
      break;
    }
    const std::size_t begin = k;
    while (k < n && !space(k)) ++k;
    out.push_back(Value::string(s.substr(st[begin], st[k] - st[begin])));
    check_list_size(out.size());
  }
  return out;
}

std::string capitalize(const std::string& s) {
  if (s.empty()) return s;
  return upper_ascii(s.substr(0, 1)) + lower_ascii(s.substr(1));
}

// jinja2's title filter: each word (split after runs of whitespace, '-', '(', '{', '[', '<') capitalised.
std::string title_filter(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (char c : s) {
    const bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' ||
                     c == '(' || c == '{' || c == '[' || c == '<';
    out += word_start ? upper_ascii(std::string(1, c)) : lower_ascii(std::string(1, c));
    word_start = sep;
  }
  return out;
}

// Python's str.title(): a letter after a non-letter is upper case, other letters lower case.
std::string python_title(const std::string& s) {
  std::string out;
  bool prev_letter = false;
  for (char c : s) {
    out += prev_letter ? lower_ascii(std::string(1, c)) : upper_ascii(std::string(1, c));
    prev_letter = ascii_letter(c);
  }
  return out;
}


// ---- tests ------------------------------------------------------------------------------------------

namespace {

bool is_int(const Value& v) { return v.type == Value::Type::integer; }

std::int64_t int_of(const Value& v, const char* test) {
  if (v.type != Value::Type::integer) fail(std::string("the test '") + test + "' needs an integer, got " + type_name(v));
  return v.i;
}

const Value& operand(const Args& a, const char* test) {
  if (a.positional.empty()) fail(std::string("the test '") + test + "' needs an argument");
  return a.positional[0];
}

using TestMap = std::map<std::string, TestFn>;

const TestMap& tests() {
  static const TestMap table = {
      {"defined", [](const Value& v, Args&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, Args&) { return v.is_undefined(); }},
      {"none", [](const Value& v, Args&) { return v.is_none(); }},
      {"boolean", [](const Value& v, Args&) { return v.type == Value::Type::boolean; }},
      {"true", [](const Value& v, Args&) { return v.type == Value::Type::boolean && v.b; }},
      {"false", [](const Value& v, Args&) { return v.type == Value::Type::boolean && !v.b; }},
      {"integer", [](const Value& v, Args&) { return is_int(v); }},
      {"float", [](const Value& v, Args&) { return v.type == Value::Type::floating; }},
      {"number", [](const Value& v, Args&) { return v.is_number(); }},
      {"string", [](const Value& v, Args&) { return v.is_string(); }},
      {"mapping", [](const Value& v, Args&) { return v.is_dict() && !v.dict->is_namespace; }},
      // jinja2's Undefined can be iterated (as nothing) and has a length: both tests hold for it.
      {"iterable", [](const Value& v, Args&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
      {"sequence", [](const Value& v, Args&) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); }},
      {"callable", [](const Value& v, Args&) { return v.is_function(); }},
      {"odd", [](const Value& v, Args&) { return int_of(v, "odd") % 2 != 0; }},
      {"even", [](const Value& v, Args&) { return int_of(v, "even") % 2 == 0; }},
      {"divisibleby", [](const Value& v, Args& a) {
         const std::int64_t d = int_of(operand(a, "divisibleby"), "divisibleby");
         if (d == 0) fail("integer division or modulo by zero");
         return int_of(v, "divisibleby") % d == 0;
       }},
      {"eq", [](const Value& v, Args& a) { return equal(v, operand(a, "eq")); }},
      {"ne", [](const Value& v, Args& a) { return !equal(v, operand(a, "ne")); }},
      {"lt", [](const Value& v, Args& a) { return less(v, operand(a, "lt")); }},
      {"le", [](const Value& v, Args& a) { return !less(operand(a, "le"), v); }},
      {"gt", [](const Value& v, Args& a) { return less(operand(a, "gt"), v); }},
      {"ge", [](const Value& v, Args& a) { return !less(v, operand(a, "ge")); }},
      {"in", [](const Value& v, Args& a) {
         for (const Value& item : iterate(operand(a, "in"))) {
           if (equal(item, v)) return true;
         }
         return operand(a, "in").is_string() && v.is_string() && operand(a, "in").s.find(v.s) != std::string::npos;
       }},
      {"lower", [](const Value& v, Args&) { return v.is_string() && lower_ascii(v.s) == v.s && upper_ascii(v.s) != v.s; }},
      {"upper", [](const Value& v, Args&) { return v.is_string() && upper_ascii(v.s) == v.s && lower_ascii(v.s) != v.s; }},
      {"sameas", [](const Value& v, Args& a) {
         const Value& o = operand(a, "sameas");
         if (v.type != o.type) return false;
         if (v.is_none() || v.is_undefined()) return true;
         if (v.type == Value::Type::boolean) return v.b == o.b;
         // Python's `is` on small ints and interned strings: their values (identity cannot be seen here).
         if (v.type == Value::Type::integer || v.is_string()) return equal(v, o);
         return (v.is_list() && v.list == o.list) || (v.is_dict() && v.dict == o.dict) || (v.is_function() && v.fn == o.fn);
       }},
  };
  return table;
}

}  // namespace

TestFn find_test(const std::string& name) {
  static const std::map<std::string, std::string> aliases = {
      {"equalto", "eq"}, {"==", "eq"}, {"!=", "ne"}, {"lessthan", "lt"}, {"<", "lt"}, {"<=", "le"},
      {"greaterthan", "gt"}, {">", "gt"}, {">=", "ge"}};
  const auto alias = aliases.find(name);
  const TestMap& table = tests();
  const auto it = table.find(alias == aliases.end() ? name : alias->second);
  return it == table.end() ? nullptr : it->second;
}

// ---- methods ----------------------------------------------------------------------------------------

namespace {

std::string string_argument(const Args& a, std::size_t index, const char* method) {
  const Value v = a.get(index, "");
  if (!v.is_string()) fail(std::string("str.") + method + "() needs a string argument, got " + type_name(v));
  return v.s;
}

// startswith / endswith: one string or a tuple of them.
bool affix_matches(const std::string& s, const Value& affixes, bool prefix, const char* method) {
  List options = affixes.is_list() ? *affixes.list : List{affixes};
  for (const Value& o : options) {
    if (!o.is_string()) fail(std::string("str.") + method + "() needs a string or a tuple of strings, got " + type_name(o));
    if (o.s.size() > s.size()) continue;
    if (prefix ? s.compare(0, o.s.size(), o.s) == 0 : s.compare(s.size() - o.s.size(), o.s.size(), o.s) == 0) return true;
  }
  return false;
}

Value strip_method(const std::string& text, const Args& a, bool left, bool right) {
  const Value chars = a.get(0, "chars");
  return Value::string(strip_text(text, left, right, chars.is_string() ? &chars.s : nullptr));
}

Value string_method(const std::string& s, const std::string& name) {
  using A = Args&;
  auto bind = [&](Value (*impl)(const std::string&, A)) {
    return Value::function([s, impl](Args& a) { return impl(s, a); });
  };
  if (name == "strip") return bind([](const std::string& t, A a) { return Value(strip_method(t, a, true, true)); });
  if (name == "lstrip") return bind([](const std::string& t, A a) { return Value(strip_method(t, a, true, false)); });
  if (name == "rstrip") return bind([](const std::string& t, A a) { return Value(strip_method(t, a, false, true)); });
  if (name == "upper") return bind([](const std::string& t, A) { return Value::string(upper_ascii(t)); });
  if (name == "lower") return bind([](const std::string& t, A) { return Value::string(lower_ascii(t)); });
  if (name == "title") return bind([](const std::string& t, A) { return Value::string(python_title(t)); });
  if (name == "capitalize") return bind([](const std::string& t, A) { return Value::string(capitalize(t)); });
  if (name == "startswith") {
    return bind([](const std::string& t, A a) { return Value::boolean(affix_matches(t, a.get(0, ""), true, "startswith")); });
  }
  if (name == "endswith") {
    return bind([](const std::string& t, A a) { return Value::boolean(affix_matches(t, a.get(0, ""), false, "endswith")); });
  }
  if (name == "split") {
    return bind([](const std::string& t, A a) {
      const Value sep = a.get(0, "sep");
      const Value maxsplit = a.get(1, "maxsplit", Value::integer(-1));
      return Value::of_list(split(t, sep.is_string() ? &sep.s : nullptr, maxsplit.i));
    });
  }
  if (name == "replace") {
    return bind([](const std::string& t, A a) {
      const Value count = a.get(2, "count", Value::integer(-1));
      return Value::string(replace_all(t, string_argument(a, 0, "replace"), string_argument(a, 1, "replace"), count.i));
    });
  }
  if (name == "find") {
    return bind([](const std::string& t, A a) {
      const std::size_t hit = t.find(string_argument(a, 0, "find"));
      return Value::integer(hit == std::string::npos ? -1 : static_cast<std::int64_t>(code_point_count(t.substr(0, hit))));
    });
  }
  if (name == "count") {
    return bind([](const std::string& t, A a) {
      const std::string needle = string_argument(a, 0, "count");
      if (needle.empty()) return Value::integer(static_cast<std::int64_t>(code_point_count(t) + 1));
      std::int64_t n = 0;
      for (std::size_t p = t.find(needle); p != std::string::npos; p = t.find(needle, p + needle.size())) ++n;
      return Value::integer(n);
    });
  }
  if (name == "join") {
    return bind([](const std::string& t, A a) {
      std::string out;
      bool first = true;
      for (const Value& item : iterate(a.get(0, ""))) {
        if (!item.is_string()) fail("str.join() expects strings, got " + type_name(item));
        out += (first ? "" : t) + item.s;
        check_string_size(out.size());
        first = false;
      }
      return Value::string(out);
    });
  }
  return Value::undefined();
}

Value dict_method(const Value& d, const std::string& name) {
  if (name == "items") {
    return Value::function([d](Args&) {
      List out;
      for (const auto& kv : d.dict->items) out.push_back(Value::of_list({Value::string(kv.first), kv.second}));
      return Value::of_list(std::move(out));
    });
  }
  if (name == "keys") {
    return Value::function([d](Args&) { return Value::of_list(iterate(d)); });
  }
  if (name == "values") {
    return Value::function([d](Args&) {
      List out;
      for (const auto& kv : d.dict->items) out.push_back(kv.second);
      return Value::of_list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function([d](Args& a) {
      const Value key = a.get(0, "key");
      const Value* found = key.is_string() ? d.dict->find(key.s) : nullptr;
      return found ? *found : a.get(1, "default", Value::none());
    });
  }
  return Value::undefined();
}

}  // namespace

Value method_of(const Value& object, const std::string& name) {
  if (object.is_string()) return string_method(object.s, name);
  if (object.is_dict() && !object.dict->is_namespace) return dict_method(object, name);
  return Value::undefined();
}

// ---- globals ----------------------------------------------------------------------------------------

Dict make_globals() {
  Dict g;
  g.set("range", Value::function([](Args& a) {
          std::int64_t start = 0, stop = 0, step = 1;
          auto int_at = [&](std::size_t k) {
            if (a.positional[k].type != Value::Type::integer) fail("range() needs integers, got " + type_name(a.positional[k]));
            return a.positional[k].i;
          };
          if (a.positional.size() == 1) {
            stop = int_at(0);
          } else if (a.positional.size() == 2 || a.positional.size() == 3) {
            start = int_at(0);
            stop = int_at(1);
            if (a.positional.size() == 3) step = int_at(2);
          } else {
            fail("range() takes 1 to 3 arguments");
          }
          if (step == 0) fail("range() arg 3 must not be zero");
          List out;
          // The distance left, unsigned (it can pass 2**63), stops the loop before k + step leaves 64 bits.
          const std::uint64_t stride = step > 0 ? static_cast<std::uint64_t>(step) : 0 - static_cast<std::uint64_t>(step);
          for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
            if (out.size() >= 100000) fail("range() is limited to 100000 items in templates");
            out.push_back(Value::integer(k));
            const std::uint64_t left = step > 0 ? static_cast<std::uint64_t>(stop) - static_cast<std::uint64_t>(k)
                                                : static_cast<std::uint64_t>(k) - static_cast<std::uint64_t>(stop);
            if (left <= stride) break;
          }
          return Value::of_list(std::move(out));
        }));
  auto keyword_dict = [](Args& a) {
    Dict d;
    for (const Value& p : a.positional) {
      if (!p.is_dict()) fail("expected a mapping as positional argument, got " + type_name(p));
      for (const auto& kv : p.dict->items) d.set(kv.first, kv.second);
    }
    for (const auto& kv : a.keyword) d.set(kv.first, kv.second);
    return d;
  };
  g.set("namespace", Value::function([keyword_dict](Args& a) {
          Value ns = Value::namespace_of(keyword_dict(a));
          count_namespace(ns.dict);
          return ns;
        }));
  g.set("dict", Value::function([keyword_dict](Args& a) { return Value::of_dict(keyword_dict(a)); }));
  g.set("raise_exception", Value::function([](Args& a) -> Value {
          throw TemplateRaised{to_str(a.get(0, "message"))};
        }));
  g.set("strftime_now", Value::function([](Args& a) {
          const Value format = a.get(0, "format");
          if (!format.is_string()) fail("strftime_now() needs a format string");
          const std::time_t now = std::time(nullptr);
          std::tm local{};
          localtime_r(&now, &local);
          char buf[256];
          const std::size_t n = std::strftime(buf, sizeof buf, format.s.c_str(), &local);
          return Value::string(std::string(buf, n));
        }));
  return g;
}

}  // namespace shardft::jinja
