// The public face of the Jinja interpreter (jinja_template.hpp): parse once, check every filter and
// test name (jinja2 refuses unknown ones when it compiles the template), render many times.
#include "jinja/template.hpp"

#include <string_view>

#include "io/utf8.hpp"
#include "jinja/ast.hpp"
#include "jinja/builtins.hpp"
#include "jinja/render.hpp"
#include "io/data_error.hpp"

namespace shardft::jinja {
namespace {

struct Checker {
  const std::string& origin;
  bool generation = false;

  void expr(const Expr* e) {
    if (!e) return;
    if (e->kind == Expr::Kind::filter && !find_filter(e->name)) syntax_error(origin, e->at, "no filter named '" + e->name + "'");
    if (e->kind == Expr::Kind::test && !find_test(e->name)) syntax_error(origin, e->at, "no test named '" + e->name + "'");
    for (const ExprPtr& a : e->args) expr(a.get());
    for (const auto& kw : e->kwargs) expr(kw.second.get());
  }
  void body(const Body& b) {
    for (const NodePtr& n : b) node(*n);
  }
  void node(const Node& n) {
    if (n.kind == Node::Kind::generation) generation = true;
    expr(n.expr.get());
    expr(n.condition.get());
    for (const auto& branch : n.branches) {
      expr(branch.first.get());
      body(branch.second);
    }
    for (const ExprPtr& d : n.defaults) expr(d.get());
    body(n.body);
    body(n.else_body);
  }
};

}  // namespace

Template::Template(const std::string& source, std::string origin) : source_(source), origin_(std::move(origin)) {
  // jinja2 renders str: a template file that does not decode is refused, as Python's open() would.
  const std::size_t bad = find_invalid_utf8(source_);
  if (bad != std::string_view::npos) {
    throw DataError(origin_ + ": not valid UTF-8 at byte " + std::to_string(bad) + " (a chat template is text)");
  }
  body_ = parse(lex(source_, origin_), origin_);
  Checker check{origin_};
  check.body(body_);
  has_generation_ = check.generation;
}

Template::~Template() = default;

Template::Output Template::render(const Dict& variables) const {
  RenderOutput out = jinja::render(body_, variables, origin_);
  return {std::move(out.text), std::move(out.generation_spans)};
}

}  // namespace shardft::jinja
