#pragma once
// What one template may cost. Chat templates come with downloaded models (tokenizer_config.json), so a
// template is hostile until it has rendered: whatever it does ends in output or in a DataError naming
// the template and the line, within bounded time, memory and stack. jinja2 under transformers has the
// same kinds of limits from Python (the recursion limit, MemoryError) without their bounds on time.
//
// The parser refuses blocks and brackets nested deeper than kMaxNesting and expression trees deeper than
// kMaxExprDepth. Rendering charges every
// evaluation, statement and loop iteration, and every 256 bytes of text and list item it builds, to a
// budget of kMaxSteps per render (bounding its time, and the memory it can build), and bounds strings,
// lists and the output, the nesting of evaluation (macro recursion) and of values, and the namespaces
// a render may make. The counters live with the render in progress on this
// thread (RenderBudget); outside a render (a builtin called on its own) only the size limits apply.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace shardft::jinja {

struct Dict;

constexpr int kMaxNesting = 100;                       // blocks and brackets in the source, and values
constexpr int kMaxExprDepth = 300;                     // a parsed expression's tree (a + b + ... chains)
constexpr int kMaxEvalDepth = 400;                     // evaluation and rendering levels at once
constexpr int kMaxMacroDepth = 100;                    // macro calls at once (recursion)
constexpr std::int64_t kMaxSteps = 2'000'000;          // work per render: a fifth of a second
constexpr std::size_t kMaxStringBytes = 16u << 20;     // one string, and the rendered output
constexpr std::size_t kMaxListItems = 1u << 20;        // one list
constexpr std::size_t kMaxListStringBytes = 64u << 20; // the strings one list holds directly
constexpr int kMaxNamespaces = 64;                     // namespace() objects per render

// The budget of the render in progress on this thread. Constructed by the renderer for one render;
// nested renders (a macro's body is not one) are not made.
class RenderBudget {
 public:
  RenderBudget();
  ~RenderBudget();
  RenderBudget(const RenderBudget&) = delete;
  RenderBudget& operator=(const RenderBudget&) = delete;

  std::int64_t steps = 0;
  int depth = 0;
  // The render's namespace() objects: one may hold itself (ns.me = ns), so their contents are cleared
  // when the render ends, or the cycle would outlive it.
  std::vector<std::weak_ptr<Dict>> namespaces;

 private:
  RenderBudget* outer_;
};

// Whether a render is in progress on this thread.
bool rendering();
// Charges `steps` to the render in progress (nothing outside one); fail() past kMaxSteps.
void charge_steps(std::int64_t steps);
// Before building a string of `bytes` bytes or a list of `items` items holding `string_bytes` bytes of
// strings directly (an operation that could build far more than it reads: 'x' * n, join, replace):
// fail() unless the limits allow it, in a render or not.
void check_string_size(std::size_t bytes);
void check_list_size(std::size_t items, std::size_t string_bytes = 0);
// A string or a list (dict) was built (Value::string, of_list, of_dict): inside a render, the same
// checks, and a step charged per 256 bytes and per item; outside one, nothing.
void note_string(std::size_t bytes);
void note_list(std::size_t items, std::size_t string_bytes);
// A namespace() made by the render in progress; fail() past kMaxNamespaces.
void count_namespace(const std::shared_ptr<Dict>& made);

// One level of the render's recursion (evaluating, rendering a block): fail() past kMaxEvalDepth
// levels at once. Outside a render it counts nothing.
class EvalLevel {
 public:
  EvalLevel();
  ~EvalLevel();
  EvalLevel(const EvalLevel&) = delete;
  EvalLevel& operator=(const EvalLevel&) = delete;
};

// One level of a walk through a value (printing, JSON, comparing): fail() past kMaxNesting levels, which
// only a namespace holding itself reaches (other values are refused deeper when they are built).
class ValueLevel {
 public:
  ValueLevel();
  ~ValueLevel();
  ValueLevel(const ValueLevel&) = delete;
  ValueLevel& operator=(const ValueLevel&) = delete;
};

// a + b, a - b, a * b, a ** b, -a on 64-bit integers: fail() where Python's unbounded integers would
// leave 64 bits ("integer overflow"), instead of wrapping or trapping.
std::int64_t checked_add(std::int64_t a, std::int64_t b);
std::int64_t checked_sub(std::int64_t a, std::int64_t b);
std::int64_t checked_mul(std::int64_t a, std::int64_t b);
std::int64_t checked_pow(std::int64_t base, std::int64_t exponent);  // exponent >= 0
std::int64_t checked_neg(std::int64_t a);
// Python's a // b and a % b (floor division; b != 0), failing where a // b leaves 64 bits.
std::int64_t floor_div(std::int64_t a, std::int64_t b);
std::int64_t floor_mod(std::int64_t a, std::int64_t b);
// int(x) of a float: fail() for NaN, infinities and values beyond 64 bits.
std::int64_t float_to_int(double x);

}  // namespace shardft::jinja
