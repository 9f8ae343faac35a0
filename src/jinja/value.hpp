#pragma once
// The values a Jinja chat template computes with, modelled on the Python objects jinja2 hands around:
// undefined (jinja2's default Undefined), None, bool, int, float, str (UTF-8; lengths, indices and
// slices count code points, as Python does), list (tuples too: templates cannot tell them apart in
// what they do), dict (insertion-ordered, string keys: what JSON messages and dict literals give),
// namespace (a dict whose attributes `set` may assign) and callables (macros, globals, bound methods).
//
// Lists and dicts are shared and never modified after they are built (transformers renders in jinja2's
// ImmutableSandboxedEnvironment, where list.append and dict.update are refused); a namespace is the
// one mutable object, shared by reference as in Python. Values built while a template renders are
// bounded in size and nesting (jinja_limits.hpp).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardft::jinja {

struct Value;
using List = std::vector<Value>;
struct Dict;
struct Args;
// A built-in or a macro: positional and keyword arguments in, a value out.
using Function = std::function<Value(Args&)>;

struct Value {
  enum class Type { undefined, none, boolean, integer, floating, string, list, dict, function };
  Type type = Type::undefined;
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::string s;                          // string; for undefined the name it was looked up by
  std::shared_ptr<const List> list;
  std::shared_ptr<Dict> dict;             // const in effect unless dict->is_namespace
  std::shared_ptr<const Function> fn;
  // How deeply lists and dicts nest in this value when it was built (0: not a container). A namespace
  // changed afterwards may hold more; jinja_limits.hpp bounds both.
  int depth = 0;

  static Value undefined(std::string name = "") { Value v; v.s = std::move(name); return v; }
  static Value none() { Value v; v.type = Type::none; return v; }
  static Value boolean(bool b) { Value v; v.type = Type::boolean; v.b = b; return v; }
  static Value integer(std::int64_t i) { Value v; v.type = Type::integer; v.i = i; return v; }
  static Value floating(double f) { Value v; v.type = Type::floating; v.f = f; return v; }
  // Strings and lists built while a template renders count against its budget (jinja_limits.hpp).
  static Value string(std::string s);
  static Value of_list(List items);
  static Value of_dict(Dict d);
  static Value namespace_of(Dict d);
  static Value function(Function fn);

  bool is_undefined() const { return type == Type::undefined; }
  bool is_none() const { return type == Type::none; }
  bool is_string() const { return type == Type::string; }
  bool is_number() const { return type == Type::integer || type == Type::floating || type == Type::boolean; }
  bool is_list() const { return type == Type::list; }
  bool is_dict() const { return type == Type::dict; }
  bool is_function() const { return type == Type::function; }
  double as_double() const { return type == Type::floating ? f : static_cast<double>(type == Type::boolean ? b : i); }
};

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);  // replaces in place, or appends (insertion order kept)
};

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The argument at `index` or named `name`, else `fallback` (undefined when not given).
  Value get(std::size_t index, const std::string& name, Value fallback = Value::undefined()) const;
};

// What went wrong while evaluating; the renderer adds the template's name and the line.
struct EvalError {
  std::string message;
};
[[noreturn]] void fail(std::string message);

// Python's name for the type ("str", "int", "dict", "undefined", ...), for messages.
std::string type_name(const Value& v);
// Python truthiness (undefined is false).
bool truthy(const Value& v);
// str(v) as jinja2 prints it: undefined -> "", None -> "None", True -> "True", 1.0 -> "1.0",
// lists and dicts in Python's repr.
std::string to_str(const Value& v);
// repr(v): strings quoted as Python quotes them.
std::string repr(const Value& v);
// json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=False) as transformers' tojson filter
// calls it (indent < 0: None, one line with ", " and ": ").
std::string to_json(const Value& v, int indent);
// Python ==.
bool equal(const Value& a, const Value& b);
// Python <; fail() for types Python cannot order.
bool less(const Value& a, const Value& b);

// ---- UTF-8 text as Python sees it -------------------------------------------------------------------

// Byte offsets of each code point's start, plus text.size() at the end (size() - 1 code points).
std::vector<std::size_t> code_point_starts(const std::string& text);
std::size_t code_point_count(const std::string& text);
bool is_python_space(char32_t c);
// str.strip/lstrip/rstrip: Unicode whitespace, or any of the code points in `chars` when given.
std::string strip_text(const std::string& text, bool left, bool right, const std::string* chars = nullptr);
// ASCII case mapping only (Python maps all of Unicode; see jinja_template.hpp).
std::string upper_ascii(std::string s);
std::string lower_ascii(std::string s);

}  // namespace shardft::jinja
