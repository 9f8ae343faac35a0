// Hostile chat templates (they come with downloaded models): every one ends in a DataError naming the
// template and the line, instead of a crash (stack overflow, SIGFPE), a hang or memory without bound
// (src/jinja/limits.hpp). And Python's answers where 64 bits hold them: float literals beyond
// double's range, slices and ranges with steps near 2**63, floor division and modulo of negatives.
#include <string>

#include <gtest/gtest.h>

#include "jinja/limits.hpp"
#include "jinja/template.hpp"
#include "data/sft_data.hpp"

namespace shardft {
namespace {

std::string render(const std::string& source) { return jinja::Template(source, "evil.jinja").render({}).text; }

// The DataError of parsing or rendering `source` ("" when it renders).
std::string error_of(const std::string& source) {
  try {
    render(source);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

#define EXPECT_FAILS_WITH(source, text)                                            \
  do {                                                                             \
    const std::string message_ = error_of(source);                                 \
    EXPECT_NE(message_.find(text), std::string::npos) << "got: " << message_;    \
    EXPECT_EQ(message_.rfind("evil.jinja, line ", 0), 0u) << message_;            \
  } while (0)

TEST(JinjaLimits, DeepNestingInTheSourceIsASyntaxErrorNotAStackOverflow) {
  EXPECT_FAILS_WITH("{{ " + repeat("(", 200000) + "1" + repeat(")", 200000) + " }}", "nested deeper than 100");
  EXPECT_FAILS_WITH("{{ " + repeat("[", 200000) + repeat("]", 200000) + " }}", "nested deeper than 100");
  EXPECT_FAILS_WITH(repeat("{% if true %}", 100000) + "x" + repeat("{% endif %}", 100000), "nested deeper than 100");
  EXPECT_FAILS_WITH("{{ " + repeat("not ", 100000) + "x }}", "nested deeper than 100");
  EXPECT_FAILS_WITH("{{ " + repeat("- ", 100000) + "1 }}", "nested deeper than 100");
  // Chains are parsed without recursion but evaluated and freed with it.
  EXPECT_FAILS_WITH("{{ " + repeat("1 + ", 100000) + "1 }}", "an expression nested deeper than 300");
  EXPECT_FAILS_WITH("{{ x" + repeat(".a", 100000) + " }}", "an expression nested deeper than 300");
  EXPECT_FAILS_WITH("{{ x" + repeat("|string", 100000) + " }}", "an expression nested deeper than 300");
  // What real templates do stays well inside.
  EXPECT_EQ(render("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}"), "1");
  EXPECT_EQ(render("{{ " + repeat("1 + ", 200) + "1 }}"), "201");
}

TEST(JinjaLimits, RecursionWithoutEndStopsWithItsLine) {
  EXPECT_FAILS_WITH("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}\n{{ m(0) }}", "nested deeper than");
  // A bounded recursion renders.
  EXPECT_EQ(render("{% macro m(n) %}{% if n > 0 %}{{ n }},{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(20) }}"),
            "20,19,18,17,16,15,14,13,12,11,10,9,8,7,6,5,4,3,2,1,");
}

TEST(JinjaLimits, WorkWithoutEndRunsOutOfSteps) {
  EXPECT_FAILS_WITH("{% for a in range(100000) %}{% for b in range(100000) %}{{ b }}{% endfor %}{% endfor %}",
                    "steps of work in one render");
  EXPECT_FAILS_WITH("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
                    "steps of work in one render");
  // The budget is per render: a render that spends most of it can be repeated.
  const jinja::Template t("{% for a in range(5000) %}{% for b in range(20) %}{% endfor %}{% endfor %}ok", "busy.jinja");
  EXPECT_EQ(t.render({}).text, "ok");
  EXPECT_EQ(t.render({}).text, "ok");
}

TEST(JinjaLimits, IntegersThatLeave64BitsAreErrorsNotTraps) {
  EXPECT_FAILS_WITH("{{ (-9223372036854775807 - 1) // -1 }}", "integer overflow");
  EXPECT_FAILS_WITH("{{ 9223372036854775807 + 1 }}", "integer overflow");
  EXPECT_FAILS_WITH("{{ 4611686018427387904 * 2 }}", "integer overflow");
  EXPECT_FAILS_WITH("{{ -(-9223372036854775807 - 1) }}", "integer overflow");
  EXPECT_FAILS_WITH("{{ (-9223372036854775807 - 1) | abs }}", "integer overflow");
  EXPECT_FAILS_WITH("{{ [9223372036854775807, 1] | sum }}", "integer overflow");
  EXPECT_FAILS_WITH("{{ 2 ** 100000000000000 }}", "integer overflow");
  EXPECT_FAILS_WITH("{{ 1e999 | int }}", "cannot convert float infinity to integer");
  EXPECT_FAILS_WITH("{{ 1e300 | int }}", "integer overflow");
  // Python's values where they fit.
  EXPECT_EQ(render("{{ (-9223372036854775807 - 1) % -1 }}"), "0");
  EXPECT_EQ(render("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ (-1) ** 100000000000001 }} {{ 1 ** 100000000000000 }}"),
            "4611686018427387904 -9223372036854775808 -1 1");
  EXPECT_EQ(render("{{ 7 % -3 }} {{ -7 % 3 }} {{ -7 // 2 }} {{ 7 // -2 }} {{ -6 // 3 }}"), "-2 2 -4 -4 -2");
}

TEST(JinjaLimits, FloatsAndStepsNear64BitsGivePythonsAnswers) {
  EXPECT_EQ(render("{{ 1e999 }} {{ -1e999 }} {{ 1e-999 }} {{ '1e999' | float }} {{ ' 2.5 ' | float }} {{ 'x' | float }}"),
            "inf -inf 0.0 inf 2.5 0.0");
  EXPECT_EQ(render("{{ 'abc'[1::9223372036854775807] }}|{{ 'abc'[::-9223372036854775807 - 1] }}|{{ [1, 2, 3][0::9223372036854775807] }}"),
            "b|c|[1]");
  EXPECT_EQ(render("{{ range(0, 9223372036854775807, 4611686018427387904) | list }}"), "[0, 4611686018427387904]");
  EXPECT_EQ(render("{{ range(9223372036854775807, -9223372036854775807 - 1, -9223372036854775807) | list }}"),
            "[9223372036854775807, 0, -9223372036854775807]");
}

TEST(JinjaLimits, StringsAndListsCannotGrowWithoutBound) {
  EXPECT_FAILS_WITH("{{ 'x' * 10000000000 }}", "a string of 10000000000 bytes");
  EXPECT_FAILS_WITH("{{ [1] * 10000000000 }}", "a list of 10000000000 items");
  EXPECT_FAILS_WITH("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                    "templates are limited to 16 MiB");
  EXPECT_FAILS_WITH("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                    "templates are limited to 16 MiB");
  EXPECT_FAILS_WITH("{{ [1] * 2000000 }}", "a list of 2000000 items: templates are limited to 1048576");
  // Doubling a list: the items it builds run out the work budget (1 step each) before the list limit.
  EXPECT_FAILS_WITH("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                    "steps of work in one render");
  EXPECT_FAILS_WITH("{{ range(100000) | join('x' * 1000) }}", "templates are limited to 16 MiB");
  EXPECT_FAILS_WITH("{{ ('a' * 100000) | replace('a', 'b' * 1000) }}", "templates are limited to 16 MiB");
  EXPECT_FAILS_WITH("{{ ('a' * 100000).replace('a', 'b' * 1000) }}", "templates are limited to 16 MiB");
  EXPECT_FAILS_WITH("{{ ('a\\n' * 100000) | indent(1000) }}", "templates are limited to 16 MiB");
  EXPECT_FAILS_WITH("{{ 'a' | indent(100000000) }}", "templates are limited to 16 MiB");
  EXPECT_FAILS_WITH("{{ ('a ' * 3000000).split() | length }}", "templates are limited to 1048576");
  EXPECT_FAILS_WITH("{{ [[1]] | tojson(indent=1000000000) }}", "more than the 64 supported");
  EXPECT_FAILS_WITH("{% for i in range(20) %}{{ 'x' * 1000000 }}{% endfor %}", "the output would pass 16 MiB");
  EXPECT_EQ(render("{{ 'ab' * 3 }}{{ [0] * 2 }}{{ 'x' * -1 }}"), "ababab[0, 0]");
  EXPECT_EQ(render("{{ '' * 10000000000 }}{{ [] * 10000000000 }}"), "[]");  // at once, not 10^10 empty appends
}

TEST(JinjaLimits, ValuesCannotNestWithoutBound) {
  EXPECT_FAILS_WITH("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
                    "nested deeper than 100 levels");
  // A namespace that holds itself prints as jinja2 prints a namespace; serialising it is refused.
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), "<Namespace>");
  EXPECT_FAILS_WITH("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}", "nested deeper than 100 levels");
  EXPECT_FAILS_WITH("{% for i in range(100) %}{% set ns = namespace(x=i) %}{% endfor %}", "namespace() objects");
}

TEST(JinjaLimits, ATemplateThatIsNotUtf8IsRefused) {
  const std::string message = error_of("{{ 'a' }}\n\xe2\x80\x80\x80\x80\x80 {{ x | trim }}");
  EXPECT_EQ(message, "evil.jinja: not valid UTF-8 at byte 13 (a chat template is text)");
}

}  // namespace
}  // namespace shardft
