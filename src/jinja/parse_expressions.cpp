// Jinja expressions (jinja_parser.hpp): recursive descent with jinja2's operator precedence, lowest
// first: `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +, then
// postfix (.attr, [index or slice], calls) and filters / tests (`|f(args)`, `is [not] t(args)`).
#include "jinja/parser.hpp"

namespace shardft::jinja {

// ---- expressions ----------------------------------------------------------------------------------

// `a, b` without brackets (the right side of set): a tuple.
ExprPtr Parser::parse_tuple_or_expression() {
  const Position at = peek().at;
  ExprPtr first = parse_expression();
  if (!is_op(",")) return first;
  ExprPtr tuple = make(Expr::Kind::list, at);
  tuple->args.push_back(std::move(first));
  while (is_op(",")) {
    ++pos_;
    if (peek().kind == Kind::block_end) break;
    tuple->args.push_back(parse_expression());
  }
  return nest(std::move(tuple));
}

ExprPtr Parser::parse_expression() { return parse_condexpr(true); }

ExprPtr Parser::parse_condexpr(bool with_condexpr) {
  const Nesting level(*this, peek().at);  // every bracket, argument and subscript comes through here
  ExprPtr value = parse_or();
  while (with_condexpr && is_name("if")) {
    ExprPtr cond = make(Expr::Kind::cond, next().at);
    ExprPtr test = parse_or();
    ExprPtr otherwise;
    if (is_name("else")) {
      ++pos_;
      otherwise = parse_condexpr(true);
    }
    cond->args.push_back(std::move(test));
    cond->args.push_back(std::move(value));
    cond->args.push_back(std::move(otherwise));
    value = nest(std::move(cond));
  }
  return value;
}

ExprPtr Parser::binary(const Token& op, ExprPtr left, ExprPtr right) {
  ExprPtr e = make(Expr::Kind::binary, op.at, op.text);
  e->args.push_back(std::move(left));
  e->args.push_back(std::move(right));
  return nest(std::move(e));
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const Token& op = next();
    left = binary(op, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const Token& op = next();
    left = binary(op, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    const Nesting level(*this, peek().at);
    ExprPtr e = make(Expr::Kind::unary, next().at, "not");
    e->args.push_back(parse_not());
    return nest(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr left = parse_math1();
  for (;;) {
    if (peek().kind == Kind::op && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                    peek().text == "<=" || peek().text == ">" || peek().text == ">=")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_math1());
    } else if (is_name("in")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_math1());
    } else if (is_name("not") && is_name("in", 1)) {
      Token op = next();
      ++pos_;
      op.text = "not in";
      left = binary(op, std::move(left), parse_math1());
    } else {
      return left;
    }
  }
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& op = next();
    left = binary(op, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    const Token& op = next();
    left = binary(op, std::move(left), parse_math2());
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& op = next();
    left = binary(op, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token& op = next();
    left = binary(op, std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const Nesting level(*this, peek().at);
    node = make(Expr::Kind::unary, peek().at, next().text);
    node->args.push_back(parse_unary(false));
    node = nest(std::move(node));
  } else {
    node = parse_postfix(parse_primary());
  }
  return with_filter ? parse_filters(std::move(node)) : std::move(node);
}

ExprPtr Parser::parse_primary() {
  const Token& t = peek();
  switch (t.kind) {
    case Kind::name: {
      ++pos_;
      ExprPtr e = make(Expr::Kind::literal, t.at);
      if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else e = make(Expr::Kind::name, t.at, t.text);
      return e;
    }
    case Kind::string: {
      ExprPtr e = make(Expr::Kind::literal, t.at);
      std::string s;
      while (peek().kind == Kind::string) s += next().text;  // adjacent literals join, as in Python
      e->value = Value::string(std::move(s));
      return e;
    }
    case Kind::integer:
    case Kind::floating: {
      ++pos_;
      ExprPtr e = make(Expr::Kind::literal, t.at);
      e->value = t.kind == Kind::integer ? Value::integer(t.integer) : Value::floating(t.floating);
      return e;
    }
    case Kind::op:
      if (t.text == "(") return parse_parenthesised();
      if (t.text == "[") return parse_sequence("]");
      if (t.text == "{") return parse_dict();
      break;
    default: break;
  }
  expected("an expression");
}

ExprPtr Parser::parse_parenthesised() {
  const Position at = next().at;
  if (is_op(")")) {  // the empty tuple
    ++pos_;
    return make(Expr::Kind::list, at);
  }
  ExprPtr first = parse_expression();
  if (is_op(")")) {
    ++pos_;
    return first;
  }
  ExprPtr tuple = make(Expr::Kind::list, at);
  tuple->args.push_back(std::move(first));
  while (is_op(",")) {
    ++pos_;
    if (is_op(")")) break;
    tuple->args.push_back(parse_expression());
  }
  expect_op(")");
  return nest(std::move(tuple));
}

ExprPtr Parser::parse_sequence(const std::string& close) {
  ExprPtr list = make(Expr::Kind::list, next().at);
  while (!is_op(close)) {
    list->args.push_back(parse_expression());
    if (!is_op(close)) expect_op(",");
  }
  ++pos_;
  return nest(std::move(list));
}

ExprPtr Parser::parse_dict() {
  ExprPtr dict = make(Expr::Kind::dict, next().at);
  while (!is_op("}")) {
    dict->args.push_back(parse_expression());
    expect_op(":");
    dict->args.push_back(parse_expression());
    if (!is_op("}")) expect_op(",");
  }
  ++pos_;
  return nest(std::move(dict));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  for (;;) {
    if (is_op(".")) {
      const Position at = next().at;
      if (peek().kind == Kind::integer) {  // foo.0 is foo[0]
        ExprPtr item = make(Expr::Kind::item, at);
        ExprPtr index = make(Expr::Kind::literal, peek().at);
        index->value = Value::integer(next().integer);
        item->args.push_back(std::move(node));
        item->args.push_back(std::move(index));
        node = nest(std::move(item));
        continue;
      }
      ExprPtr attr = make(Expr::Kind::attr, at, expect_name("an attribute name after '.'"));
      attr->args.push_back(std::move(node));
      node = nest(std::move(attr));
    } else if (is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node), Expr::Kind::call, "");
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr object) {
  const Position at = next().at;
  ExprPtr parts[3];
  int colons = 0;
  for (;;) {
    if (is_op("]")) break;
    if (is_op(":")) {
      if (++colons > 2) expected("']'");
      ++pos_;
      continue;
    }
    if (parts[colons]) expected("':' or ']'");
    parts[colons] = parse_expression();
  }
  ++pos_;
  if (colons == 0) {
    if (!parts[0]) syntax_error(origin_, at, "an empty subscript");
    ExprPtr item = make(Expr::Kind::item, at);
    item->args.push_back(std::move(object));
    item->args.push_back(std::move(parts[0]));
    return nest(std::move(item));
  }
  ExprPtr slice = make(Expr::Kind::slice, at);
  slice->args.push_back(std::move(object));
  for (auto& p : parts) slice->args.push_back(std::move(p));
  return nest(std::move(slice));
}

// `(args)` after a callee, filter or test: positional then keyword (name=value) arguments.
ExprPtr Parser::parse_call(ExprPtr target, Expr::Kind kind, const std::string& name) {
  ExprPtr call = make(kind, kind == Expr::Kind::call ? target->at : peek().at, name);
  call->args.push_back(std::move(target));
  if (!is_op("(")) return nest(std::move(call));
  ++pos_;
  while (!is_op(")")) {
    if (peek().kind == Kind::name && is_op("=", 1)) {
      std::string key = next().text;
      ++pos_;
      call->kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!call->kwargs.empty()) syntax_error(origin_, peek().at, "a positional argument after a keyword argument");
      call->args.push_back(parse_expression());
    }
    if (!is_op(")")) expect_op(",");
  }
  ++pos_;
  return nest(std::move(call));
}

ExprPtr Parser::parse_filters(ExprPtr node) {
  for (;;) {
    if (is_op("|")) {
      ++pos_;
      const Position at = peek().at;
      std::string name = expect_name("a filter name after '|'");
      while (is_op(".") && peek(1).kind == Kind::name) name += "." + (++pos_, next().text);
      node = parse_call(std::move(node), Expr::Kind::filter, name);
      node->at = at;
    } else if (is_name("is")) {
      ++pos_;
      bool negated = false;
      if (is_name("not")) {
        ++pos_;
        negated = true;
      }
      const Position at = peek().at;
      const std::string name = expect_name("a test name after 'is'");
      node = parse_call(std::move(node), Expr::Kind::test, name);
      node->at = at;
      node->negated = negated;
      // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
      const Token& t = peek();
      const bool bare_arg = node->args.size() == 1 && node->kwargs.empty() &&
                            (t.kind == Kind::string || t.kind == Kind::integer || t.kind == Kind::floating ||
                             (t.kind == Kind::op && (t.text == "[" || t.text == "{")) ||
                             (t.kind == Kind::name && t.text != "else" && t.text != "or" && t.text != "and" &&
                              t.text != "if" && t.text != "is" && t.text != "not" && t.text != "in"));
      if (bare_arg) {
        node->args.push_back(parse_postfix(parse_primary()));
        node = nest(std::move(node));
      }
    } else if (is_op("(")) {
      node = parse_call(std::move(node), Expr::Kind::call, "");
    } else {
      return node;
    }
  }
}

}  // namespace shardft::jinja
