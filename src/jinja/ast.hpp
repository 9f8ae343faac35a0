#pragma once
// The parsed form of a Jinja template: expressions and statements, as jinja2's grammar has them for the
// constructs chat templates use (see jinja_template.hpp for the list).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/lexer.hpp"
#include "jinja/value.hpp"

namespace shardft::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind { literal, name, list, dict, attr, item, slice, call, filter, test, unary, binary, cond };
  Kind kind = Kind::literal;
  Position at;
  Value value;       // literal
  std::string name;  // name; attr: the attribute; filter/test: its name; unary/binary: the operator
  // The operands, by kind:
  //   list: the elements (tuples too)       dict: key0, value0, key1, value1, ...
  //   attr: object                          item: object, index
  //   slice: object, start, stop, step (null when left out)
  //   call: callee, positional arguments    filter/test: operand, positional arguments
  //   unary: operand   binary: left, right  cond: condition, then, else (null: undefined)
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // call, filter, test
  bool negated = false;                                 // test: `is not`
  int depth = 1;                                        // levels of the tree below and with this node
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { text, output, if_chain, for_loop, set, set_block, macro, generation, loop_break, loop_continue };
  Kind kind = Kind::text;
  Position at;
  std::string text;                  // text
  ExprPtr expr;                      // output: what is printed; for_loop: the iterable; set: the value
  // if_chain: (condition, body) for if and each elif; a null condition for else.
  std::vector<std::pair<ExprPtr, Body>> branches;
  // for_loop: the loop variables; set / set_block: the names assigned (set ns.attr: {ns}, attr below).
  std::vector<std::string> targets;
  std::string attr;                  // set ns.attr = ...: the attribute
  ExprPtr condition;                 // for x in xs if condition
  Body body, else_body;              // for_loop (else_body: no iteration), set_block, macro, generation
  std::string name;                  // macro
  std::vector<std::string> params;   // macro parameters, in order
  std::vector<ExprPtr> defaults;     // macro defaults, one per parameter (null: none)
};

// The template's statements; DataError naming origin, line and column and what was expected.
Body parse(const std::vector<Token>& tokens, const std::string& origin);

}  // namespace shardft::jinja
