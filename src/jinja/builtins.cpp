// Filters, tests, methods and globals for chat templates (jinja_builtins.hpp).
#include "jinja/builtins.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <map>

#include "jinja/limits.hpp"
#include "jinja/value.hpp"

namespace shardft::jinja {

bool python_index(std::int64_t index, std::size_t size, std::size_t& out) {
  const auto n = static_cast<std::int64_t>(size);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return false;
  out = static_cast<std::size_t>(index);
  return true;
}

std::vector<std::size_t> python_slice(const Value& start_v, const Value& stop_v, const Value& step_v, std::size_t size) {
  auto as_int = [](const Value& v, const char* what) {
    if (v.type != Value::Type::integer && v.type != Value::Type::boolean) {
      fail(std::string("slice ") + what + " must be an integer or none, got " + type_name(v));
    }
    return v.type == Value::Type::boolean ? static_cast<std::int64_t>(v.b) : v.i;
  };
  const auto n = static_cast<std::int64_t>(size);
  const std::int64_t step = step_v.is_none() ? 1 : as_int(step_v, "step");
  if (step == 0) fail("slice step cannot be zero");
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const Value& v, std::int64_t dflt, const char* what) {
    if (v.is_none()) return dflt;
    std::int64_t x = as_int(v, what);
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  const std::int64_t start = adjust(start_v, step < 0 ? n - 1 : 0, "start");
  const std::int64_t stop = adjust(stop_v, step < 0 ? -1 : n, "stop");
  // Stops before k + step could leave 64 bits (a step of 2**63 - 1 takes one element).
  const std::uint64_t stride = step > 0 ? static_cast<std::uint64_t>(step) : 0 - static_cast<std::uint64_t>(step);
  std::vector<std::size_t> out;
  for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    out.push_back(static_cast<std::size_t>(k));
    const std::uint64_t left = step > 0 ? static_cast<std::uint64_t>(stop - k) : static_cast<std::uint64_t>(k - stop);
    if (left <= stride) break;
  }
  return out;
}

List iterate(const Value& v) {
  switch (v.type) {
    case Value::Type::undefined: return {};
    case Value::Type::list: return *v.list;
    case Value::Type::dict: {
      List keys;
      for (const auto& kv : v.dict->items) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Type::string: {
      List chars;
      const std::vector<std::size_t> starts = code_point_starts(v.s);
      check_list_size(starts.size() - 1, v.s.size());
      for (std::size_t k = 0; k + 1 < starts.size(); ++k) chars.push_back(Value::string(v.s.substr(starts[k], starts[k + 1] - starts[k])));
      return chars;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

namespace {

std::string str_arg(const Args& args, std::size_t index, const std::string& name, const std::string& fallback) {
  const Value v = args.get(index, name);
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_string()) fail("argument '" + name + "' must be a string, got " + type_name(v));
  return v.s;
}

std::int64_t int_arg(const Args& args, std::size_t index, const std::string& name, std::int64_t fallback) {
  const Value v = args.get(index, name);
  if (v.is_undefined() || v.is_none()) return fallback;
  if (v.type != Value::Type::integer && v.type != Value::Type::boolean) fail("argument '" + name + "' must be an integer");
  return v.type == Value::Type::boolean ? v.b : v.i;
}

Value items_of(const Value& v) {
  if (v.is_undefined()) return Value::of_list({});
  if (!v.is_dict()) fail("items: expected a mapping, got " + type_name(v));
  List out;
  for (const auto& kv : v.dict->items) out.push_back(Value::of_list({Value::string(kv.first), kv.second}));
  return Value::of_list(std::move(out));
}

Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t dot = std::min(path.find('.', pos), path.size());
    const std::string part = path.substr(pos, dot - pos);
    const Value* found = v.is_dict() ? v.dict->find(part) : nullptr;
    v = found ? *found : Value::undefined("no attribute '" + part + "'");
    pos = dot + 1;
  }
  return v;
}

// select / reject / selectattr / rejectattr: keep the items whose (attribute's) test result is `keep`.
Value select_items(const Value& input, Args& args, bool by_attribute, bool keep) {
  std::size_t first_test_arg = 0;
  std::string attr;
  if (by_attribute) {
    attr = str_arg(args, 0, "attribute", "");
    first_test_arg = 1;
  }
  const Value test_name = args.get(first_test_arg, "");
  TestFn test = nullptr;
  if (test_name.is_string()) {
    test = find_test(test_name.s);
    if (!test) fail("no test named '" + test_name.s + "'");
  }
  Args test_args;
  for (std::size_t k = first_test_arg + 1; k < args.positional.size(); ++k) test_args.positional.push_back(args.positional[k]);
  List out;
  for (const Value& item : iterate(input)) {
    const Value subject = by_attribute ? attribute_path(item, attr) : item;
    const bool passes = test ? test(subject, test_args) : truthy(subject);
    if (passes == keep) out.push_back(item);
  }
  return Value::of_list(std::move(out));
}

using FilterMap = std::map<std::string, FilterFn>;

const FilterMap& filters() {
  static const FilterMap table = {
      {"trim", [](const Value& v, Args& a) {
         const Value chars = a.get(0, "chars");
         return Value::string(strip_text(to_str(v), true, true, chars.is_string() ? &chars.s : nullptr));
       }},
      {"tojson", [](const Value& v, Args& a) {
         for (const auto& kw : a.keyword) {
           if (kw.first != "indent" && !(kw.first == "ensure_ascii" && !truthy(kw.second)) &&
               !(kw.first == "sort_keys" && !truthy(kw.second))) {
             fail("tojson: the argument " + kw.first + "=" + repr(kw.second) + " is not supported");
           }
         }
         const std::int64_t indent = int_arg(a, 0, "indent", -1);
         if (indent > 64) fail("tojson: indent " + std::to_string(indent) + " is more than the 64 supported");
         return Value::string(to_json(v, static_cast<int>(indent)));
       }},
      {"length", [](const Value& v, Args&) {
         if (v.is_string()) return Value::integer(static_cast<std::int64_t>(code_point_count(v.s)));
         if (v.is_dict()) return Value::integer(static_cast<std::int64_t>(v.dict->items.size()));
         if (v.is_list()) return Value::integer(static_cast<std::int64_t>(v.list->size()));
         if (v.is_undefined()) return Value::integer(0);
         fail("object of type '" + type_name(v) + "' has no len()");
       }},
      {"upper", [](const Value& v, Args&) { return Value::string(upper_ascii(to_str(v))); }},
      {"lower", [](const Value& v, Args&) { return Value::string(lower_ascii(to_str(v))); }},
      {"capitalize", [](const Value& v, Args&) { return Value::string(capitalize(to_str(v))); }},
      {"title", [](const Value& v, Args&) { return Value::string(title_filter(to_str(v))); }},
      {"string", [](const Value& v, Args&) { return Value::string(to_str(v)); }},
      {"safe", [](const Value& v, Args&) { return v; }},
      {"replace", [](const Value& v, Args& a) {
         return Value::string(replace_all(to_str(v), str_arg(a, 0, "old", ""), str_arg(a, 1, "new", ""), int_arg(a, 2, "count", -1)));
       }},
      {"default", [](const Value& v, Args& a) {
         const bool boolean = truthy(a.get(1, "boolean", Value::boolean(false)));
         if (v.is_undefined() || (boolean && !truthy(v))) return a.get(0, "default_value", Value::string(""));
         return v;
       }},
      {"join", [](const Value& v, Args& a) {
         const std::string sep = str_arg(a, 0, "d", "");
         const Value attr = a.get(1, "attribute");
         std::string out;
         bool first = true;
         for (const Value& item : iterate(v)) {
           out += (first ? "" : sep) + to_str(attr.is_string() ? attribute_path(item, attr.s) : item);
           check_string_size(out.size());
           first = false;
         }
         return Value::string(out);
       }},
      {"first", [](const Value& v, Args&) {
         const List items = iterate(v);
         return items.empty() ? Value::undefined("no first item, the sequence was empty") : items.front();
       }},
      {"last", [](const Value& v, Args&) {
         const List items = iterate(v);
         return items.empty() ? Value::undefined("no last item, the sequence was empty") : items.back();
       }},
      {"list", [](const Value& v, Args&) { return Value::of_list(iterate(v)); }},
      {"items", [](const Value& v, Args&) { return items_of(v); }},
      {"reverse", [](const Value& v, Args&) {
         if (v.is_string()) {
           std::string out;
           for (const Value& c : iterate(v)) out.insert(0, c.s);
           return Value::string(out);
         }
         List items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::of_list(std::move(items));
       }},
      {"int", [](const Value& v, Args& a) {
         if (v.type == Value::Type::floating) return Value::integer(float_to_int(v.f));
         if (v.type == Value::Type::integer || v.type == Value::Type::boolean) return Value::integer(v.type == Value::Type::boolean ? v.b : v.i);
         if (v.is_string()) {
           try {
             std::size_t used = 0;
             const std::string t = strip_text(v.s, true, true);
             const long long x = std::stoll(t, &used);
             if (used == t.size()) return Value::integer(x);
           } catch (const std::exception&) {
           }
         }
         return Value::integer(int_arg(a, 0, "default", 0));
       }},
      {"float", [](const Value& v, Args&) {
         if (v.is_number()) return Value::floating(v.as_double());
         if (v.is_string()) {
           // Python's float(): '1e999' is inf; text that is not a number gives the default below.
           const std::string t = strip_text(v.s, true, true);
           char* end = nullptr;
           const double x = std::strtod(t.c_str(), &end);
           if (!t.empty() && end == t.c_str() + t.size()) return Value::floating(x);
         }
         return Value::floating(0.0);
       }},
      {"abs", [](const Value& v, Args&) {
         if (v.type == Value::Type::floating) return Value::floating(std::fabs(v.f));
         if (v.type == Value::Type::integer) return Value::integer(v.i < 0 ? checked_neg(v.i) : v.i);
         fail("bad operand type for abs(): '" + type_name(v) + "'");
       }},
      {"map", [](const Value& v, Args& a) {
         List out;
         const Value attr = a.get(99, "attribute");
         if (attr.is_string()) {
           for (const Value& item : iterate(v)) {
             Value x = attribute_path(item, attr.s);
             if (x.is_undefined()) x = a.get(99, "default");
             out.push_back(x);
           }
           return Value::of_list(std::move(out));
         }
         const std::string name = str_arg(a, 0, "filter", "");
         const FilterFn f = find_filter(name);
         if (!f) fail("map: no filter named '" + name + "'");
         Args rest;
         rest.positional.assign(a.positional.begin() + 1, a.positional.end());
         for (const Value& item : iterate(v)) out.push_back(f(item, rest));
         return Value::of_list(std::move(out));
       }},
      {"select", [](const Value& v, Args& a) { return select_items(v, a, false, true); }},
      {"reject", [](const Value& v, Args& a) { return select_items(v, a, false, false); }},
      {"selectattr", [](const Value& v, Args& a) { return select_items(v, a, true, true); }},
      {"rejectattr", [](const Value& v, Args& a) { return select_items(v, a, true, false); }},
      {"indent", [](const Value& v, Args& a) {
         // jinja2 3.1: lines after the first indented (the first too with first=True); blank lines only
         // with blank=True.
         const std::int64_t width = int_arg(a, 0, "width", 4);
         check_string_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)));
         const std::string pad(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)), ' ');
         const bool first = truthy(a.get(1, "first")), blank = truthy(a.get(2, "blank"));
         const std::string s = to_str(v);
         std::string out;
         std::vector<std::string> parts;
         std::size_t pos = 0;
         for (;;) {
           const std::size_t nl = s.find('\n', pos);
           parts.push_back(s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
           if (nl == std::string::npos) break;
           pos = nl + 1;
         }
         for (std::size_t k = 0; k < parts.size(); ++k) {
           if (k > 0) out += "\n";
           if ((k > 0 || first) && (blank || !parts[k].empty())) out += pad;
           out += parts[k];
           check_string_size(out.size());
         }
         return Value::string(out);
       }},
      {"sort", [](const Value& v, Args& a) {
         List items = iterate(v);
         const bool reverse = truthy(a.get(0, "reverse")), case_sensitive = truthy(a.get(1, "case_sensitive"));
         const Value attr = a.get(2, "attribute");
         auto key = [&](const Value& x) {
           Value k = attr.is_string() ? attribute_path(x, attr.s) : x;
           if (k.is_string() && !case_sensitive) k.s = lower_ascii(k.s);
           return k;
         };
         std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
           return reverse ? less(key(y), key(x)) : less(key(x), key(y));
         });
         return Value::of_list(std::move(items));
       }},
      {"unique", [](const Value& v, Args&) {
         List out;
         for (const Value& item : iterate(v)) {
           if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equal(o, item); })) out.push_back(item);
         }
         return Value::of_list(std::move(out));
       }},
      {"sum", [](const Value& v, Args& a) {
         const Value attr = a.get(0, "attribute");
         Value total = a.get(1, "start", Value::integer(0));
         for (const Value& item : iterate(v)) {
           const Value x = attr.is_string() ? attribute_path(item, attr.s) : item;
           if (!x.is_number() || !total.is_number()) fail("sum: '" + type_name(x) + "' is not a number");
           total = total.type == Value::Type::integer && x.type == Value::Type::integer ? Value::integer(checked_add(total.i, x.i))
                                                                                        : Value::floating(total.as_double() + x.as_double());
         }
         return total;
       }},
  };
  return table;
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  static const std::map<std::string, std::string> aliases = {{"d", "default"}, {"count", "length"}};
  const auto alias = aliases.find(name);
  const FilterMap& table = filters();
  const auto it = table.find(alias == aliases.end() ? name : alias->second);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace shardft::jinja
