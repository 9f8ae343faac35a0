#pragma once
// What a chat template can call by name: filters (`x|trim`), tests (`x is defined`), the methods of
// strings and dicts (`s.startswith('a')`, `d.items()`), and the globals transformers provides (range,
// namespace, dict, raise_exception, strftime_now). Semantics follow jinja2 3.1 and Python 3; transformers'
// own tojson (json.dumps with ensure_ascii=False) replaces jinja2's.
#include <string>

#include "jinja/value.hpp"

namespace shardft::jinja {

using FilterFn = Value (*)(const Value& input, Args& args);
using TestFn = bool (*)(const Value& input, Args& args);

// nullptr when there is no such filter / test.
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);

// The bound method `name` of a string, dict or list value; undefined when it has none.
Value method_of(const Value& object, const std::string& name);

// The globals every render starts from.
Dict make_globals();

// Thrown by raise_exception(message): the template refused its input.
struct TemplateRaised {
  std::string message;
};

// Python-style integer indices: a negative index counts from the end; false when out of range.
bool python_index(std::int64_t index, std::size_t size, std::size_t& out);
// The positions a Python slice [start:stop:step] selects from a sequence of `size` items.
std::vector<std::size_t> python_slice(const Value& start, const Value& stop, const Value& step, std::size_t size);

// The items a `for` loop or a filter iterates: list elements, dict keys, string characters; nothing for
// undefined; fail() for anything else.
List iterate(const Value& v);

// Python's str methods that filters share: replace (count < 0: all), split (sep null: runs of
// whitespace; maxsplit < 0: no limit), capitalize, title; and jinja2's title filter.
std::string replace_all(const std::string& s, const std::string& old, const std::string& with, std::int64_t count);
List split(const std::string& s, const std::string* sep, std::int64_t maxsplit);
std::string capitalize(const std::string& s);
std::string python_title(const std::string& s);
std::string title_filter(const std::string& s);

}  // namespace shardft::jinja
