// Jinja parsing (jinja_ast.hpp): recursive descent with jinja2's operator precedence, lowest first:
// `x if c else y`, or, and, not, comparisons and `in`, + -, ~, * / // %, **, unary - +, then postfix
// (.attr, [index or slice], calls) and filters / tests (`|f(args)`, `is [not] t(args)`).
#include <set>

#include "data/jinja_ast.hpp"

namespace shardft::jinja {
namespace {

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
  ExprPtr make(Expr::Kind kind, Position at, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->at = at;
    e->name = std::move(name);
    return e;
  }

  // Statements until a block tag named in `ends` (consumed up to its name; `end` receives it). With no
  // ends, until the end of the template. `opener` names the open block for the unclosed-block message.
  Body parse_body(const std::set<std::string>& ends, std::string& end, const Token* opener) {
    Body body;
    for (;;) {
      const Token& t = peek();
      if (t.kind == Kind::eof) {
        if (ends.empty()) return body;
        std::string names;
        for (const std::string& n : ends) names += (names.empty() ? "'" : " or '") + n + "'";
        syntax_error(origin_, t.at,
                     "expected " + names + " (the '" + opener->text + "' at line " + std::to_string(opener->at.line) +
                         " column " + std::to_string(opener->at.column) + " is not closed), got the end of the template");
      }
      if (t.kind == Kind::text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::text;
        n->at = t.at;
        n->text = t.text;
        body.push_back(std::move(n));
        ++pos_;
      } else if (t.kind == Kind::var_begin) {
        ++pos_;
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::output;
        n->at = t.at;
        n->expr = parse_expression();
        if (peek().kind != Kind::var_end) expected("'}}'");
        ++pos_;
        body.push_back(std::move(n));
      } else if (t.kind == Kind::block_begin) {
        ++pos_;
        if (peek().kind != Kind::name) expected("a tag name");
        if (ends.count(peek().text)) {
          end = next().text;
          return body;
        }
        body.push_back(parse_statement());
      } else {
        expected("template text or a tag");
      }
    }
  }

  NodePtr parse_statement() {
    const Token& tag = next();
    auto n = std::make_unique<Node>();
    n->at = tag.at;
    const std::string& name = tag.text;
    std::string end;
    if (name == "if") {
      n->kind = Node::Kind::if_chain;
      ExprPtr cond = parse_expression();
      for (;;) {
        expect_block_end("if");
        Body body = parse_body({"elif", "else", "endif"}, end, &tag);
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (end == "endif") break;
        if (end == "else") {
          expect_block_end("else");
          Body rest = parse_body({"endif"}, end, &tag);
          n->branches.emplace_back(nullptr, std::move(rest));
          break;
        }
        cond = parse_expression();
      }
      expect_block_end("endif");
    } else if (name == "for") {
      n->kind = Node::Kind::for_loop;
      do {
        n->targets.push_back(expect_name("a loop variable name"));
      } while (is_op(",") && (++pos_, true));
      if (!is_name("in")) expected("'in'");
      ++pos_;
      n->expr = parse_condexpr(false);  // `if` here filters the loop, it is no conditional expression
      if (is_name("if")) {
        ++pos_;
        n->condition = parse_condexpr(false);
      }
      if (is_name("recursive")) syntax_error(origin_, peek().at, "recursive loops are not supported");
      expect_block_end("for");
      n->body = parse_body({"else", "endfor"}, end, &tag);
      if (end == "else") {
        expect_block_end("else");
        n->else_body = parse_body({"endfor"}, end, &tag);
      }
      expect_block_end("endfor");
    } else if (name == "set") {
      n->targets.push_back(expect_name("a variable name after 'set'"));
      if (is_op(".")) {
        ++pos_;
        n->attr = expect_name("an attribute name");
      }
      while (n->attr.empty() && is_op(",")) {
        ++pos_;
        n->targets.push_back(expect_name("a variable name"));
      }
      if (is_op("=")) {
        ++pos_;
        n->kind = Node::Kind::set;
        n->expr = parse_tuple_or_expression();
        expect_block_end("set");
      } else {
        if (n->targets.size() != 1 || !n->attr.empty()) expected("'='");
        n->kind = Node::Kind::set_block;
        expect_block_end("set");
        n->body = parse_body({"endset"}, end, &tag);
        expect_block_end("endset");
      }
    } else if (name == "macro") {
      n->kind = Node::Kind::macro;
      n->name = expect_name("the macro's name");
      expect_op("(");
      while (!is_op(")")) {
        n->params.push_back(expect_name("a parameter name"));
        ExprPtr dflt;
        if (is_op("=")) {
          ++pos_;
          dflt = parse_expression();
        }
        n->defaults.push_back(std::move(dflt));
        if (!is_op(")")) expect_op(",");
      }
      ++pos_;
      expect_block_end("macro");
      n->body = parse_body({"endmacro"}, end, &tag);
      if (peek().kind == Kind::name) ++pos_;  // {% endmacro name %}
      expect_block_end("endmacro");
    } else if (name == "generation") {
      n->kind = Node::Kind::generation;
      expect_block_end("generation");
      n->body = parse_body({"endgeneration"}, end, &tag);
      expect_block_end("endgeneration");
    } else if (name == "break" || name == "continue") {
      n->kind = name == "break" ? Node::Kind::loop_break : Node::Kind::loop_continue;
      expect_block_end(name);
    } else {
      syntax_error(origin_, tag.at, "unknown tag '" + name + "'");
    }
    return n;
  }

  // ---- expressions ----------------------------------------------------------------------------------

  // `a, b` without brackets (the right side of set): a tuple.
  ExprPtr parse_tuple_or_expression() {
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
    return tuple;
  }

  ExprPtr parse_expression() { return parse_condexpr(true); }

  ExprPtr parse_condexpr(bool with_condexpr) {
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
      value = std::move(cond);
    }
    return value;
  }

  ExprPtr binary(const Token& op, ExprPtr left, ExprPtr right) {
    ExprPtr e = make(Expr::Kind::binary, op.at, op.text);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      ExprPtr e = make(Expr::Kind::unary, next().at, "not");
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& op = next();
      left = binary(op, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(Expr::Kind::unary, peek().at, next().text);
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters(std::move(node)) : std::move(node);
  }

  ExprPtr parse_primary() {
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

  ExprPtr parse_parenthesised() {
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
    return tuple;
  }

  ExprPtr parse_sequence(const std::string& close) {
    ExprPtr list = make(Expr::Kind::list, next().at);
    while (!is_op(close)) {
      list->args.push_back(parse_expression());
      if (!is_op(close)) expect_op(",");
    }
    ++pos_;
    return list;
  }

  ExprPtr parse_dict() {
    ExprPtr dict = make(Expr::Kind::dict, next().at);
    while (!is_op("}")) {
      dict->args.push_back(parse_expression());
      expect_op(":");
      dict->args.push_back(parse_expression());
      if (!is_op("}")) expect_op(",");
    }
    ++pos_;
    return dict;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".")) {
        const Position at = next().at;
        if (peek().kind == Kind::integer) {  // foo.0 is foo[0]
          ExprPtr item = make(Expr::Kind::item, at);
          ExprPtr index = make(Expr::Kind::literal, peek().at);
          index->value = Value::integer(next().integer);
          item->args.push_back(std::move(node));
          item->args.push_back(std::move(index));
          node = std::move(item);
          continue;
        }
        ExprPtr attr = make(Expr::Kind::attr, at, expect_name("an attribute name after '.'"));
        attr->args.push_back(std::move(node));
        node = std::move(attr);
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node), Expr::Kind::call, "");
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
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
      return item;
    }
    ExprPtr slice = make(Expr::Kind::slice, at);
    slice->args.push_back(std::move(object));
    for (auto& p : parts) slice->args.push_back(std::move(p));
    return slice;
  }

  // `(args)` after a callee, filter or test: positional then keyword (name=value) arguments.
  ExprPtr parse_call(ExprPtr target, Expr::Kind kind, const std::string& name) {
    ExprPtr call = make(kind, kind == Expr::Kind::call ? target->at : peek().at, name);
    call->args.push_back(std::move(target));
    if (!is_op("(")) return call;
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
    return call;
  }

  ExprPtr parse_filters(ExprPtr node) {
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
        if (bare_arg) node->args.push_back(parse_postfix(parse_primary()));
      } else if (is_op("(")) {
        node = parse_call(std::move(node), Expr::Kind::call, "");
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& toks_;
  const std::string& origin_;
  std::size_t pos_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& origin) {
  return Parser(tokens, origin).parse_template();
}

}  // namespace shardft::jinja
