#pragma once
// Rendering a parsed Jinja template (jinja_ast.hpp) with a set of variables.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "jinja/ast.hpp"

namespace shardft::jinja {

struct RenderOutput {
  std::string text;
  // Byte ranges [begin, end) of `text` that {% generation %} blocks rendered, in order.
  std::vector<std::pair<std::size_t, std::size_t>> generation_spans;
};

// DataError "<origin>, line L column C: <what went wrong>" for runtime errors (undefined attribute
// access, bad operand types, raise_exception, ...).
RenderOutput render(const Body& body, const Dict& variables, const std::string& origin);

}  // namespace shardft::jinja
