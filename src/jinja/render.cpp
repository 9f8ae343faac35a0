// Rendering (jinja_render.hpp): expressions evaluated with Python's semantics and jinja2's lookup rules
// (a missing variable, key, attribute or index is undefined; using an undefined beyond printing,
// testing or iterating it is an error), statements with jinja2's scoping (each loop iteration and each
// macro call has its own scope; `if` has none, so a `set` inside it is seen after it).
#include "jinja/render.hpp"

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "jinja/builtins.hpp"
#include "jinja/limits.hpp"
#include "io/data_error.hpp"

namespace shardft::jinja {
namespace {

struct Scope {
  std::shared_ptr<Scope> parent;
  Dict vars;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      if (const Value* v = s->vars.find(name)) return v;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child_of(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { normal, loop_break, loop_continue };

// An error already located; passes through the enclosing expressions' handlers unchanged.
struct Located {
  std::string message;
};

[[noreturn]] void use_of_undefined(const Value& v) {
  fail(v.s.empty() ? "an undefined value was used" : v.s);
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) use_of_undefined(a);
  if (b.is_undefined()) use_of_undefined(b);
  const bool ints = (a.type == Value::Type::integer || a.type == Value::Type::boolean) &&
                    (b.type == Value::Type::integer || b.type == Value::Type::boolean);
  if (a.is_number() && b.is_number()) {
    const std::int64_t x = a.type == Value::Type::boolean ? a.b : a.i, y = b.type == Value::Type::boolean ? b.b : b.i;
    const double dx = a.as_double(), dy = b.as_double();
    if ((op == "/" || op == "//" || op == "%") && dy == 0) fail("division by zero");
    if (op == "+") return ints ? Value::integer(checked_add(x, y)) : Value::floating(dx + dy);
    if (op == "-") return ints ? Value::integer(checked_sub(x, y)) : Value::floating(dx - dy);
    if (op == "*") return ints ? Value::integer(checked_mul(x, y)) : Value::floating(dx * dy);
    if (op == "/") return Value::floating(dx / dy);
    if (op == "//") return ints ? Value::integer(floor_div(x, y)) : Value::floating(std::floor(dx / dy));
    if (op == "%") return ints ? Value::integer(floor_mod(x, y)) : Value::floating(dx - std::floor(dx / dy) * dy);
    if (op == "**") return ints && y >= 0 ? Value::integer(checked_pow(x, y)) : Value::floating(std::pow(dx, dy));
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    check_string_size(a.s.size() + b.s.size());
    return Value::string(a.s + b.s);
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    check_list_size(a.list->size() + b.list->size());
    List out = *a.list;
    out.insert(out.end(), b.list->begin(), b.list->end());
    return Value::of_list(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.type == Value::Type::integer) {
    // Sized before it is built: 'x' * 10**10 must fail, not grow until memory runs out.
    const std::size_t unit = a.is_string() ? a.s.size() : a.list->size();
    const std::size_t times = b.i > 0 && unit > 0 ? static_cast<std::size_t>(b.i) : 0;  // '' * 10**10 is '' at once
    std::size_t size = 0;
    if (__builtin_mul_overflow(unit, times, &size)) size = SIZE_MAX;
    if (a.is_string()) {
      check_string_size(size);
    } else {
      check_list_size(size);
    }
    if (a.is_string()) {
      std::string out;
      for (std::size_t k = 0; k < times; ++k) out += a.s;
      return Value::string(out);
    }
    List out;
    for (std::size_t k = 0; k < times; ++k) out.insert(out.end(), a.list->begin(), a.list->end());
    return Value::of_list(std::move(out));
  }
  fail("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.type) {
    case Value::Type::undefined: return false;
    case Value::Type::string:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.s.find(item.s) != std::string::npos;
    case Value::Type::list:
      for (const Value& v : *container.list) {
        if (equal(v, item)) return true;
      }
      return false;
    case Value::Type::dict: return item.is_string() && container.dict->find(item.s) != nullptr;
    default: fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

// jinja2's getattr: a dict's key (or method), a string's method; undefined when there is none.
Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined()) use_of_undefined(object);
  if (object.is_dict()) {
    if (!object.dict->is_namespace) {
      Value method = method_of(object, name);
      if (!method.is_undefined()) return method;
    }
    if (const Value* v = object.dict->find(name)) return *v;
  } else {
    Value method = method_of(object, name);
    if (!method.is_undefined()) return method;
  }
  return Value::undefined("'" + type_name(object) + " object' has no attribute '" + name + "'");
}

// jinja2's getitem: obj[index]; a missing key or an index out of range is undefined.
Value get_item(const Value& object, const Value& index) {
  if (object.is_undefined()) use_of_undefined(object);
  std::size_t k = 0;
  if (object.is_list() && index.type == Value::Type::integer) {
    if (python_index(index.i, object.list->size(), k)) return (*object.list)[k];
    return Value::undefined(type_name(object) + " index " + std::to_string(index.i) + " out of range");
  }
  if (object.is_string() && index.type == Value::Type::integer) {
    const std::vector<std::size_t> starts = code_point_starts(object.s);
    if (python_index(index.i, starts.size() - 1, k)) return Value::string(object.s.substr(starts[k], starts[k + 1] - starts[k]));
    return Value::undefined("string index " + std::to_string(index.i) + " out of range");
  }
  if (object.is_dict() && index.is_string()) {
    if (const Value* v = object.dict->find(index.s)) return *v;
    return get_attribute(object, index.s);
  }
  if (index.is_string()) return get_attribute(object, index.s);
  return Value::undefined("'" + type_name(object) + " object' has no item " + repr(index));
}

class Renderer {
 public:
  explicit Renderer(const std::string& origin) : origin_(origin) {}

  RenderOutput run(const Body& body, const Dict& variables) {
    const RenderBudget budget;  // this render's limits (jinja_limits.hpp)
    // A macro holds the scope it was defined in, and that scope holds the macro: the scopes macros
    // captured are emptied when the render ends (returning or failing), or each render would leak them.
    struct ForgetMacroScopes {
      std::vector<std::weak_ptr<Scope>>& scopes;
      ~ForgetMacroScopes() {
        for (const auto& w : scopes) {
          if (auto s = w.lock()) s->vars.items.clear();
        }
      }
    } forget{macro_scopes_};
    auto globals = std::make_shared<Scope>();
    globals->vars = make_globals();
    auto top = child_of(globals);
    top->vars = variables;
    RenderOutput out;
    render(body, top, out.text);
    out.generation_spans = std::move(spans_);
    return out;
  }

 private:
  [[noreturn]] void located(Position at, const std::string& message) const {
    throw Located{origin_ + ", line " + std::to_string(at.line) + " column " + std::to_string(at.column) + ": " + message};
  }

  Flow render(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const NodePtr& n : body) {
      Flow flow = Flow::normal;
      try {
        const EvalLevel level;
        charge_steps(1);
        flow = render_node(*n, scope, out);
      } catch (const EvalError& e) {  // a limit reached by the statement itself, outside its expressions
        located(n->at, e.message);
      }
      if (flow != Flow::normal) return flow;
    }
    return Flow::normal;
  }

  // The output grows only within kMaxStringBytes, charged like any string built.
  static void append(std::string& out, const std::string& text) {
    if (out.size() + text.size() > kMaxStringBytes) {
      fail("the output would pass " + std::to_string(kMaxStringBytes >> 20) + " MiB");
    }
    charge_steps(static_cast<std::int64_t>(text.size() >> 8));
    out += text;
  }

  Flow render_node(const Node& n, const ScopePtr& scope, std::string& out) {
    switch (n.kind) {
      case Node::Kind::text: append(out, n.text); return Flow::normal;
      case Node::Kind::output: {
        const Value v = eval(*n.expr, scope);
        append(out, to_str(v));
        return Flow::normal;
      }
      case Node::Kind::if_chain:
        for (const auto& branch : n.branches) {
          if (!branch.first || truthy(eval(*branch.first, scope))) return render(branch.second, scope, out);
        }
        return Flow::normal;
      case Node::Kind::for_loop: return render_for(n, scope, out);
      case Node::Kind::set: assign(n, eval(*n.expr, scope), scope); return Flow::normal;
      case Node::Kind::set_block: {
        std::string captured;
        ++capturing_;
        render(n.body, scope, captured);
        --capturing_;
        scope->vars.set(n.targets[0], Value::string(std::move(captured)));
        return Flow::normal;
      }
      case Node::Kind::macro: scope->vars.set(n.name, make_macro(n, scope)); return Flow::normal;
      case Node::Kind::generation: {
        // Offsets are only meaningful in the template's own output, not in a macro's or a block set's.
        if (capturing_ > 0) located(n.at, "a generation block inside a macro or a block set is not supported");
        const std::size_t begin = out.size();
        const Flow flow = render(n.body, scope, out);
        spans_.emplace_back(begin, out.size());
        return flow;
      }
      case Node::Kind::loop_break: return Flow::loop_break;
      case Node::Kind::loop_continue: return Flow::loop_continue;
    }
    return Flow::normal;
  }

  void assign(const Node& n, const Value& value, const ScopePtr& scope) {
    if (!n.attr.empty()) {
      const Value* target = scope->find(n.targets[0]);
      if (!target || !target->is_dict() || !target->dict->is_namespace) {
        located(n.at, "cannot assign attribute '" + n.attr + "' on '" + n.targets[0] + "', which is not a namespace()");
      }
      if (value.depth + 1 > kMaxNesting) {
        located(n.at, "a value nested deeper than " + std::to_string(kMaxNesting) + " levels in a namespace");
      }
      target->dict->set(n.attr, value);
      return;
    }
    if (n.targets.size() == 1) {
      scope->vars.set(n.targets[0], value);
      return;
    }
    const List items = unpack(value, n.targets.size(), n.at);
    for (std::size_t k = 0; k < items.size(); ++k) scope->vars.set(n.targets[k], items[k]);
  }

  List unpack(const Value& value, std::size_t count, Position at) {
    List items;
    try {
      items = iterate(value);
    } catch (const EvalError& e) {
      located(at, e.message);
    }
    if (items.size() != count) {
      located(at, "cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(count) + " names");
    }
    return items;
  }

  Flow render_for(const Node& n, const ScopePtr& scope, std::string& out) {
    List items;
    const Value iterable = eval(*n.expr, scope);
    try {
      items = iterate(iterable);
    } catch (const EvalError& e) {
      located(n.expr->at, e.message);
    }
    auto bind = [&](const ScopePtr& s, const Value& item) {
      if (n.targets.size() == 1) {
        s->vars.set(n.targets[0], item);
      } else {
        const List parts = unpack(item, n.targets.size(), n.at);
        for (std::size_t k = 0; k < parts.size(); ++k) s->vars.set(n.targets[k], parts[k]);
      }
    };
    if (n.condition) {  // `for x in xs if c`: the loop (and loop.length) sees only the items that pass
      List kept;
      for (const Value& item : items) {
        auto s = child_of(scope);
        bind(s, item);
        if (truthy(eval(*n.condition, s))) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      render(n.else_body, child_of(scope), out);
      return Flow::normal;
    }
    const auto length = static_cast<std::int64_t>(items.size());
    for (std::int64_t k = 0; k < length; ++k) {
      charge_steps(1);  // an empty body costs its iterations too
      auto s = child_of(scope);
      bind(s, items[k]);
      Dict loop;
      loop.set("index", Value::integer(k + 1));
      loop.set("index0", Value::integer(k));
      loop.set("revindex", Value::integer(length - k));
      loop.set("revindex0", Value::integer(length - k - 1));
      loop.set("first", Value::boolean(k == 0));
      loop.set("last", Value::boolean(k == length - 1));
      loop.set("length", Value::integer(length));
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      loop.set("previtem", k > 0 ? items[k - 1] : Value::undefined("there is no previous item"));
      loop.set("nextitem", k + 1 < length ? items[k + 1] : Value::undefined("there is no next item"));
      loop.set("cycle", Value::function([k](Args& args) -> Value {
                 if (args.positional.empty()) fail("no items for cycling given");
                 return args.positional[static_cast<std::size_t>(k) % args.positional.size()];
               }));
      s->vars.set("loop", Value::namespace_of(std::move(loop)));
      if (render(n.body, s, out) == Flow::loop_break) break;
    }
    return Flow::normal;
  }

  Value make_macro(const Node& n, const ScopePtr& defined_in) {
    macro_scopes_.push_back(defined_in);
    const Node* node = &n;
    return Value::function([this, node, defined_in](Args& args) -> Value {
      if (macro_depth_ >= kMaxMacroDepth) {
        fail("macro calls nested deeper than " + std::to_string(kMaxMacroDepth) + " (a recursion without end?)");
      }
      ++macro_depth_;
      struct Leave {
        int& depth;
        ~Leave() { --depth; }
      } leave{macro_depth_};
      if (args.positional.size() > node->params.size()) {
        fail("macro '" + node->name + "' takes not more than " + std::to_string(node->params.size()) +
             " argument(s)");
      }
      auto s = child_of(defined_in);
      for (std::size_t k = 0; k < node->params.size(); ++k) {
        Value v = args.get(k, node->params[k]);
        if (v.is_undefined() && !(k < args.positional.size()) && node->defaults[k]) v = eval(*node->defaults[k], s);
        if (v.is_undefined() && v.s.empty()) v = Value::undefined("'" + node->params[k] + "' is undefined");
        s->vars.set(node->params[k], v);
      }
      for (const auto& kw : args.keyword) {
        if (std::find(node->params.begin(), node->params.end(), kw.first) == node->params.end()) {
          fail("macro '" + node->name + "' takes no keyword argument '" + kw.first + "'");
        }
      }
      std::string captured;
      ++capturing_;
      render(node->body, s, captured);
      --capturing_;
      return Value::string(std::move(captured));
    });
  }

  // ---- expressions --------------------------------------------------------------------------------

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      const EvalLevel level;
      charge_steps(1);
      return eval_unlocated(e, scope);
    } catch (const EvalError& err) {
      located(e.at, err.message);
    } catch (const TemplateRaised& raised) {
      located(e.at, "the template raised an exception: " + raised.message);
    }
  }

  Args eval_args(const Expr& e, const ScopePtr& scope) {
    Args args;
    for (std::size_t k = 1; k < e.args.size(); ++k) args.positional.push_back(eval(*e.args[k], scope));
    for (const auto& kw : e.kwargs) args.keyword.emplace_back(kw.first, eval(*kw.second, scope));
    return args;
  }

  Value eval_unlocated(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::literal: return e.value;
      case Expr::Kind::name: {
        const Value* v = scope->find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::list: {
        List items;
        for (const ExprPtr& a : e.args) items.push_back(eval(*a, scope));
        return Value::of_list(std::move(items));
      }
      case Expr::Kind::dict: {
        Dict d;
        for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
          const Value key = eval(*e.args[k], scope);
          if (!key.is_string()) fail("dict keys must be strings here, got " + type_name(key));
          d.set(key.s, eval(*e.args[k + 1], scope));
        }
        return Value::of_dict(std::move(d));
      }
      case Expr::Kind::attr: return get_attribute(eval(*e.args[0], scope), e.name);
      case Expr::Kind::item: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
      case Expr::Kind::slice: return eval_slice(e, scope);
      case Expr::Kind::call: {
        const Value callee = eval(*e.args[0], scope);
        if (callee.is_undefined()) use_of_undefined(callee);
        if (!callee.is_function()) fail("'" + type_name(callee) + "' object is not callable");
        Args args = eval_args(e, scope);
        return (*callee.fn)(args);
      }
      case Expr::Kind::filter: {
        const FilterFn filter = find_filter(e.name);
        if (!filter) fail("no filter named '" + e.name + "'");
        const Value input = eval(*e.args[0], scope);
        Args args = eval_args(e, scope);
        return filter(input, args);
      }
      case Expr::Kind::test: {
        const TestFn test = find_test(e.name);
        if (!test) fail("no test named '" + e.name + "'");
        const Value input = eval(*e.args[0], scope);
        Args args = eval_args(e, scope);
        return Value::boolean(test(input, args) != e.negated);
      }
      case Expr::Kind::unary: {
        const Value v = eval(*e.args[0], scope);
        if (e.name == "not") return Value::boolean(!truthy(v));
        if (!v.is_number()) fail("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
        if (e.name == "+") return v.type == Value::Type::boolean ? Value::integer(v.b) : v;
        if (v.type == Value::Type::floating) return Value::floating(-v.f);
        return Value::integer(checked_neg(v.type == Value::Type::boolean ? static_cast<std::int64_t>(v.b) : v.i));
      }
      case Expr::Kind::binary: return eval_binary(e, scope);
      case Expr::Kind::cond:
        if (truthy(eval(*e.args[0], scope))) return eval(*e.args[1], scope);
        return e.args[2] ? eval(*e.args[2], scope) : Value::undefined("the conditional expression has no else");
    }
    return Value::undefined();
  }

  Value eval_binary(const Expr& e, const ScopePtr& scope) {
    const std::string& op = e.name;
    const Value a = eval(*e.args[0], scope);
    if (op == "and") return truthy(a) ? eval(*e.args[1], scope) : a;
    if (op == "or") return truthy(a) ? a : eval(*e.args[1], scope);
    const Value b = eval(*e.args[1], scope);
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "<") return Value::boolean(less(a, b));
    if (op == ">") return Value::boolean(less(b, a));
    if (op == "<=") return Value::boolean(!less(b, a));
    if (op == ">=") return Value::boolean(!less(a, b));
    if (op == "in") return Value::boolean(contains(b, a));
    if (op == "not in") return Value::boolean(!contains(b, a));
    if (op == "~") {
      std::string left = to_str(a);
      const std::string right = to_str(b);
      check_string_size(left.size() + right.size());
      return Value::string(left + right);
    }
    return arithmetic(op, a, b);
  }

  Value eval_slice(const Expr& e, const ScopePtr& scope) {
    const Value object = eval(*e.args[0], scope);
    if (object.is_undefined()) use_of_undefined(object);
    const Value start = e.args[1] ? eval(*e.args[1], scope) : Value::none();
    const Value stop = e.args[2] ? eval(*e.args[2], scope) : Value::none();
    const Value step = e.args[3] ? eval(*e.args[3], scope) : Value::none();
    if (object.is_string()) {
      const std::vector<std::size_t> starts = code_point_starts(object.s);
      std::string out;
      for (std::size_t k : python_slice(start, stop, step, starts.size() - 1)) out += object.s.substr(starts[k], starts[k + 1] - starts[k]);
      return Value::string(std::move(out));
    }
    if (object.is_list()) {
      List out;
      for (std::size_t k : python_slice(start, stop, step, object.list->size())) out.push_back((*object.list)[k]);
      return Value::of_list(std::move(out));
    }
    fail("'" + type_name(object) + "' object is not subscriptable");
  }

  const std::string& origin_;
  std::vector<std::pair<std::size_t, std::size_t>> spans_;
  int capturing_ = 0;
  int macro_depth_ = 0;
  std::vector<std::weak_ptr<Scope>> macro_scopes_;
};

}  // namespace

RenderOutput render(const Body& body, const Dict& variables, const std::string& origin) {
  try {
    return Renderer(origin).run(body, variables);
  } catch (const Located& e) {
    throw DataError(e.message);
  }
}

}  // namespace shardft::jinja
