#pragma once
// The Jinja parser's state and helpers, shared by its two halves: statements (jinja_parser.cpp) and
// expressions (jinja_parse_expressions.cpp). Internal to the interpreter; jinja_ast.hpp has parse().
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "jinja/ast.hpp"
#include "jinja/limits.hpp"

namespace shardft::jinja {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& origin) : toks_(tokens), origin_(origin) {}

  Body parse_template() {
    std::string end;
    Body body = parse_body({}, end, nullptr);
    return body;
  }

 private:
  using Kind = Token::Kind;

  const Token& peek(std::size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(pos_++, toks_.size() - 1)]; }
  bool is_op(const std::string& op, std::size_t ahead = 0) const {
    return peek(ahead).kind == Kind::op && peek(ahead).text == op;
  }
  bool is_name(const std::string& name, std::size_t ahead = 0) const {
    return peek(ahead).kind == Kind::name && peek(ahead).text == name;
  }
  [[noreturn]] void expected(const std::string& what) const {
    syntax_error(origin_, peek().at, "expected " + what + ", got " + describe(peek()));
  }
  void expect_op(const std::string& op) {
    if (!is_op(op)) expected("'" + op + "'");
    ++pos_;
  }
  void expect_block_end(const std::string& tag) {
    if (peek().kind != Kind::block_end) expected("'%}' to end the '" + tag + "' tag");
    ++pos_;
  }
  std::string expect_name(const std::string& what) {
    if (peek().kind != Kind::name) expected(what);
    return next().text;
  }
  // One level of the parser's recursion, a nested block or bracket: a syntax error past kMaxNesting,
  // before the recursion can exhaust the stack (a template with 200000 '(' is a crash otherwise).
  class Nesting {
   public:
    Nesting(Parser& p, Position at) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) {
        syntax_error(p_.origin_, at, "blocks or brackets nested deeper than " + std::to_string(kMaxNesting) + " levels");
      }
    }
    ~Nesting() { --p_.nesting_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& p_;
  };
  // `e` with its depth from its operands': a syntax error past kMaxExprDepth (chains like a + b + ... are
  // built without recursion, but evaluated and freed by it).
  ExprPtr nest(ExprPtr e) {
    int deepest = 0;
    for (const ExprPtr& a : e->args) deepest = a ? std::max(deepest, a->depth) : deepest;
    for (const auto& kw : e->kwargs) deepest = kw.second ? std::max(deepest, kw.second->depth) : deepest;
    e->depth = deepest + 1;
    if (e->depth > kMaxExprDepth) {
      syntax_error(origin_, e->at, "an expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels");
    }
    return e;
  }
  ExprPtr make(Expr::Kind kind, Position at, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->at = at;
    e->name = std::move(name);
    return e;
  }

  // Statements until a block tag named in `ends` (consumed up to its name; `end` receives it). With no
  // ends, until the end of the template. `opener` names the open block for the unclosed-block message.
  Body parse_body(const std::set<std::string>& ends, std::string& end, const Token* opener);

  NodePtr parse_statement();
  // The block tags after their name, each filling `n` up to and including its end tag (`tag`: the opener).
  void parse_if(Node& n, const Token& tag);
  void parse_for(Node& n, const Token& tag);
  void parse_set(Node& n, const Token& tag);
  void parse_macro(Node& n, const Token& tag);

  // ---- expressions (jinja_parse_expressions.cpp) ----
  ExprPtr parse_expression();
  ExprPtr parse_tuple_or_expression();
  ExprPtr parse_condexpr(bool with_condexpr);
  ExprPtr binary(const Token& op, ExprPtr left, ExprPtr right);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_parenthesised();
  ExprPtr parse_sequence(const std::string& close);
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr object);
  ExprPtr parse_call(ExprPtr target, Expr::Kind kind, const std::string& name);
  ExprPtr parse_filters(ExprPtr node);

  const std::vector<Token>& toks_;
  const std::string& origin_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace shardft::jinja
