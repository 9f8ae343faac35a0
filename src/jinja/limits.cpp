// The render's budget and the checked integer arithmetic (jinja_limits.hpp).
#include "jinja/limits.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "jinja/value.hpp"

namespace shardft::jinja {

namespace {
thread_local RenderBudget* current = nullptr;
thread_local int value_levels = 0;

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

[[noreturn]] void overflow() {
  fail("integer overflow: the result leaves 64 bits (Python's integers are unbounded, a template's here are not)");
}
}  // namespace

RenderBudget::RenderBudget() : outer_(current) { current = this; }
RenderBudget::~RenderBudget() {
  for (const std::weak_ptr<Dict>& ns : namespaces) {
    if (auto d = ns.lock()) d->items.clear();
  }
  current = outer_;
}

void charge_steps(std::int64_t steps) {
  if (!current) return;
  current->steps += steps;
  if (current->steps > kMaxSteps) {
    fail("the template did more than " + std::to_string(kMaxSteps) +
         " steps of work in one render (a loop or a recursion without end?)");
  }
}

bool rendering() { return current != nullptr; }

void check_string_size(std::size_t bytes) {
  if (bytes > kMaxStringBytes) {
    fail("a string of " + std::to_string(bytes) + " bytes: templates are limited to " + mib(kMaxStringBytes));
  }
}

void check_list_size(std::size_t items, std::size_t string_bytes) {
  if (items > kMaxListItems) {
    fail("a list of " + std::to_string(items) + " items: templates are limited to " + std::to_string(kMaxListItems));
  }
  if (string_bytes > kMaxListStringBytes) {
    fail("a list holding " + std::to_string(string_bytes) + " bytes of strings: templates are limited to " +
         mib(kMaxListStringBytes));
  }
}

void note_string(std::size_t bytes) {
  if (!current) return;
  check_string_size(bytes);
  charge_steps(static_cast<std::int64_t>(bytes >> 8));
}

void note_list(std::size_t items, std::size_t string_bytes) {
  if (!current) return;
  check_list_size(items, string_bytes);
  charge_steps(static_cast<std::int64_t>(items + (string_bytes >> 8)));
}

void count_namespace(const std::shared_ptr<Dict>& made) {
  if (!current) return;
  if (static_cast<int>(current->namespaces.size()) >= kMaxNamespaces) {
    fail("more than " + std::to_string(kMaxNamespaces) + " namespace() objects in one render");
  }
  current->namespaces.push_back(made);
}

EvalLevel::EvalLevel() {
  if (!current) return;
  if (++current->depth > kMaxEvalDepth) {
    --current->depth;
    fail("evaluation nested deeper than " + std::to_string(kMaxEvalDepth) + " levels (a recursion without end?)");
  }
}
EvalLevel::~EvalLevel() {
  if (current) --current->depth;
}

ValueLevel::ValueLevel() {
  if (++value_levels > kMaxNesting) {
    --value_levels;
    fail("a value nested deeper than " + std::to_string(kMaxNesting) + " levels (a namespace that holds itself?)");
  }
}
ValueLevel::~ValueLevel() { --value_levels; }

std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}

std::int64_t checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

std::int64_t checked_neg(std::int64_t a) { return checked_sub(0, a); }

// By squaring: at most 63 multiplications before the result (or the base) leaves 64 bits.
std::int64_t checked_pow(std::int64_t base, std::int64_t exponent) {
  if (base == 0 || base == 1) return exponent == 0 ? 1 : base;
  if (base == -1) return exponent % 2 == 0 ? 1 : -1;
  std::int64_t result = 1;
  for (;;) {
    if (exponent & 1) result = checked_mul(result, base);
    exponent >>= 1;
    if (exponent == 0) return result;
    base = checked_mul(base, base);
  }
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  if (b == -1) return checked_neg(a);  // the one quotient that leaves 64 bits (and traps in hardware)
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t b) {
  if (b == -1) return 0;
  const std::int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

std::int64_t float_to_int(double x) {
  if (std::isnan(x)) fail("cannot convert float NaN to integer");
  if (std::isinf(x)) fail("cannot convert float infinity to integer");
  const double t = std::trunc(x);
  // 2^63 is exactly representable; every double below it in magnitude converts.
  if (t >= 9223372036854775808.0 || t < -9223372036854775808.0) overflow();
  return static_cast<std::int64_t>(t);
}

}  // namespace shardft::jinja
