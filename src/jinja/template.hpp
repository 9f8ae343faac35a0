#pragma once
// A Jinja template as Hugging Face chat templates are written and as transformers renders them
// (jinja2 3.1, ImmutableSandboxedEnvironment, trim_blocks and lstrip_blocks on, the loopcontrols and
// {% generation %} extensions, tojson / raise_exception / strftime_now added). The interpreter is ours:
//   jinja_lexer   tags, whitespace control, tokens      jinja_parser  the AST (jinja_ast.hpp)
//   jinja_render  evaluation and statements            jinja_value   Python-like values, str/repr/json
//   jinja_builtins filters                              jinja_methods tests, str/dict methods, globals
//
// Supported: {{ }}, {% %}, {# #}, `-`/`+` whitespace control; if/elif/else, for (loop.index, index0,
// revindex, revindex0, first, last, length, previtem, nextitem, cycle; `for x in xs if c`; else;
// unpacking `for k, v in d.items()`), break/continue, set (also `a, b = ...`, `ns.attr = ...`, and
// block set), macro and calls (positional, keyword, defaults), generation blocks; literals (strings
// with Python escapes, numbers, lists, tuples, dicts), attribute and item access, slices [a:b:c],
// arithmetic + - * / // % **, ~, comparisons, in / not in, and/or/not, `x if c else y`, filters and
// tests with arguments; the filters, tests, methods and globals in jinja_builtins.hpp.
// Not supported (a DataError naming the tag or filter): recursive loops, call blocks, filter blocks,
// with, include/extends/import, raw. Approximate: upper/lower/title/capitalize map ASCII letters only;
// tuples print as lists; dict keys are strings.
//
// A template is hostile until it has rendered (they come with downloaded models): jinja_limits.hpp bounds
// nesting, recursion, work, sizes and integer arithmetic, each an error naming the line.
//
// Undefined values behave as jinja2's default Undefined: printing gives "", tests and `default` see
// them, iterating gives nothing; attribute access, subscripts, arithmetic and calls on them are errors.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.hpp"

namespace shardft::jinja {

struct Node;

class Template {
 public:
  // Parses `source`; `origin` names it in every error ("dir/tokenizer_config.json: chat_template").
  // DataError "<origin>, line L column C: <what was expected>" on a syntax error, an unknown filter or test.
  Template(const std::string& source, std::string origin);
  ~Template();
  Template(const Template&) = delete;
  Template& operator=(const Template&) = delete;

  struct Output {
    std::string text;
    std::vector<std::pair<std::size_t, std::size_t>> generation_spans;  // byte ranges of {% generation %} output
  };
  // Renders with these variables; DataError naming origin, line and column on a runtime error, and
  // "the template raised an exception: <message>" for raise_exception.
  Output render(const Dict& variables) const;

  bool has_generation_blocks() const { return has_generation_; }
  const std::string& origin() const { return origin_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_, origin_;
  std::vector<std::unique_ptr<Node>> body_;
  bool has_generation_ = false;
};

}  // namespace shardft::jinja
