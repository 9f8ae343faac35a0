// Jinja statements (jinja_parser.hpp): text, {{ }}, and the block tags chat templates use; expressions
// are parsed in jinja_parse_expressions.cpp.
#include "jinja/parser.hpp"

namespace shardft::jinja {

Body Parser::parse_body(const std::set<std::string>& ends, std::string& end, const Token* opener) {
  const Nesting level(*this, opener ? opener->at : peek().at);
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

NodePtr Parser::parse_statement() {
  const Token& tag = next();
  auto n = std::make_unique<Node>();
  n->at = tag.at;
  const std::string& name = tag.text;
  std::string end;
  if (name == "if") {
    parse_if(*n, tag);
  } else if (name == "for") {
    parse_for(*n, tag);
  } else if (name == "set") {
    parse_set(*n, tag);
  } else if (name == "macro") {
    parse_macro(*n, tag);
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

void Parser::parse_if(Node& n, const Token& tag) {
  std::string end;
  n.kind = Node::Kind::if_chain;
  ExprPtr cond = parse_expression();
  for (;;) {
    expect_block_end("if");
    Body body = parse_body({"elif", "else", "endif"}, end, &tag);
    n.branches.emplace_back(std::move(cond), std::move(body));
    if (end == "endif") break;
    if (end == "else") {
      expect_block_end("else");
      Body rest = parse_body({"endif"}, end, &tag);
      n.branches.emplace_back(nullptr, std::move(rest));
      break;
    }
    cond = parse_expression();
  }
  expect_block_end("endif");
}

void Parser::parse_for(Node& n, const Token& tag) {
  std::string end;
  n.kind = Node::Kind::for_loop;
  do {
    n.targets.push_back(expect_name("a loop variable name"));
  } while (is_op(",") && (++pos_, true));
  if (!is_name("in")) expected("'in'");
  ++pos_;
  n.expr = parse_condexpr(false);  // `if` here filters the loop, it is no conditional expression
  if (is_name("if")) {
    ++pos_;
    n.condition = parse_condexpr(false);
  }
  if (is_name("recursive")) syntax_error(origin_, peek().at, "recursive loops are not supported");
  expect_block_end("for");
  n.body = parse_body({"else", "endfor"}, end, &tag);
  if (end == "else") {
    expect_block_end("else");
    n.else_body = parse_body({"endfor"}, end, &tag);
  }
  expect_block_end("endfor");
}

void Parser::parse_set(Node& n, const Token& tag) {
  std::string end;
  n.targets.push_back(expect_name("a variable name after 'set'"));
  if (is_op(".")) {
    ++pos_;
    n.attr = expect_name("an attribute name");
  }
  while (n.attr.empty() && is_op(",")) {
    ++pos_;
    n.targets.push_back(expect_name("a variable name"));
  }
  if (is_op("=")) {
    ++pos_;
    n.kind = Node::Kind::set;
    n.expr = parse_tuple_or_expression();
    expect_block_end("set");
  } else {
    if (n.targets.size() != 1 || !n.attr.empty()) expected("'='");
    n.kind = Node::Kind::set_block;
    expect_block_end("set");
    n.body = parse_body({"endset"}, end, &tag);
    expect_block_end("endset");
  }
}

void Parser::parse_macro(Node& n, const Token& tag) {
  std::string end;
  n.kind = Node::Kind::macro;
  n.name = expect_name("the macro's name");
  expect_op("(");
  while (!is_op(")")) {
    n.params.push_back(expect_name("a parameter name"));
    ExprPtr dflt;
    if (is_op("=")) {
      ++pos_;
      dflt = parse_expression();
    }
    n.defaults.push_back(std::move(dflt));
    if (!is_op(")")) expect_op(",");
  }
  ++pos_;
  expect_block_end("macro");
  n.body = parse_body({"endmacro"}, end, &tag);
  if (peek().kind == Kind::name) ++pos_;  // {% endmacro name %}
  expect_block_end("endmacro");
}

Body parse(const std::vector<Token>& tokens, const std::string& origin) {
  return Parser(tokens, origin).parse_template();
}

}  // namespace shardft::jinja
