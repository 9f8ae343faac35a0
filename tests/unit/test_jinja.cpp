// The Jinja interpreter (src/jinja/*.cpp): one differential case per construct against jinja2 as
// transformers configures it (tests/reference/jinja_chat.json "snippets", made by
// make_jinja_chat_fixtures.py), and the errors: where they point (line:column), what they say.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "jinja/template.hpp"
#include "data/sft_data.hpp"

namespace shardft {
namespace {

using json = nlohmann::ordered_json;  // keeps the fixture's key order, as Python dicts do

const json& fixture() {
  static const json j = [] {
    std::ifstream in(std::string(SHARDFT_REFERENCE_DIR) + "/jinja_chat.json");
    return json::parse(in);
  }();
  return j;
}

jinja::Value to_value(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return jinja::Value::none();
    case json::value_t::boolean: return jinja::Value::boolean(j.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return jinja::Value::integer(j.get<std::int64_t>());
    case json::value_t::number_float: return jinja::Value::floating(j.get<double>());
    case json::value_t::string: return jinja::Value::string(j.get<std::string>());
    case json::value_t::array: {
      jinja::List items;
      for (const json& e : j) items.push_back(to_value(e));
      return jinja::Value::of_list(std::move(items));
    }
    default: {
      jinja::Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), to_value(it.value()));
      return jinja::Value::of_dict(std::move(d));
    }
  }
}

std::string render(const std::string& source, const jinja::Dict& vars = {}) {
  return jinja::Template(source, "test.jinja").render(vars).text;
}

// The DataError message of rendering (or parsing) `source`; "" when it renders.
std::string error_of(const std::string& source, const jinja::Dict& vars = {}) {
  try {
    render(source, vars);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

class JinjaSnippet : public ::testing::TestWithParam<std::string> {};

TEST_P(JinjaSnippet, RendersAsJinja2) {
  for (const json& s : fixture()["snippets"]) {
    if (s["name"] != GetParam()) continue;
    const jinja::Value vars = to_value(s["variables"]);
    const std::string source = s["template"];
    if (s.contains("error")) {
      const std::string message = error_of(source, *vars.dict);
      EXPECT_NE(message, "") << "jinja2 fails with " << s["message"] << "; shardft renders it";
      EXPECT_EQ(message.rfind("test.jinja, line ", 0), 0u) << message;
    } else {
      EXPECT_EQ(render(source, *vars.dict), s["output"].get<std::string>()) << source;
    }
    return;
  }
  FAIL() << "no snippet " << GetParam();
}

std::vector<std::string> snippet_names() {
  std::vector<std::string> names;
  for (const json& s : fixture()["snippets"]) names.push_back(s["name"]);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fixture, JinjaSnippet, ::testing::ValuesIn(snippet_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(JinjaSnippets, CoverEveryConstructOfTheBrief) {
  // The fixture must keep one snippet per construct; a regenerated file that lost some fails here.
  EXPECT_GE(snippet_names().size(), 70u);
}

// ---- errors -----------------------------------------------------------------------------------------

TEST(JinjaErrors, SyntaxErrorNamesLineColumnAndWhatWasExpected) {
  const std::string message = error_of("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}");
  EXPECT_NE(message.find("test.jinja, line 3 column 10"), std::string::npos) << message;
  EXPECT_NE(message.find("expected an expression, got '}}'"), std::string::npos) << message;
}

TEST(JinjaErrors, UnclosedBlockNamesTheOpeningTag) {
  const std::string message = error_of("a\n  {% for m in messages %}{{ m }}");
  EXPECT_NE(message.find("expected 'else' or 'endfor'"), std::string::npos) << message;
  EXPECT_NE(message.find("the 'for' at line 2 column 6 is not closed"), std::string::npos) << message;
}

TEST(JinjaErrors, UnknownFilterIsNamedWhenTheTemplateIsRead) {
  try {
    jinja::Template t("ok\n{{ x | frobnicate(1) }}", "dir/tokenizer_config.json: chat_template");
    FAIL() << "an unknown filter parses";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), "dir/tokenizer_config.json: chat_template, line 2 column 8: no filter named 'frobnicate'");
  }
  EXPECT_NE(error_of("{{ 1 is frobnicated }}").find("no test named 'frobnicated'"), std::string::npos);
  EXPECT_NE(error_of("{% frobnicate %}").find("unknown tag 'frobnicate'"), std::string::npos);
}

TEST(JinjaErrors, RaiseExceptionMessageSurfaces) {
  const std::string message = error_of("{% if messages | length == 0 %}{{ raise_exception('need ' ~ 1 ~ ' message') }}{% endif %}",
                                        jinja::Dict{{{"messages", jinja::Value::of_list({})}}});
  EXPECT_EQ(message, "test.jinja, line 1 column 35: the template raised an exception: need 1 message");
}

TEST(JinjaErrors, UndefinedIsAnErrorOnlyWhereJinja2Errs) {
  EXPECT_EQ(render("[{{ nope }}][{{ nope | default('d') }}][{{ nope is defined }}][{% for x in nope %}x{% endfor %}]"),
            "[][d][False][]");
  EXPECT_NE(error_of("{{ nope.attr }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nope[0] }}").find("'nope' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nope() }}").find("'nope' is undefined"), std::string::npos);
  // A missing key is undefined; going one step further is the error, naming what was missing.
  EXPECT_EQ(render("[{{ d.x }}]", jinja::Dict{{{"d", jinja::Value::of_dict({})}}}), "[]");
  EXPECT_NE(error_of("{{ d.x.y }}", jinja::Dict{{{"d", jinja::Value::of_dict({})}}}).find("'dict object' has no attribute 'x'"),
            std::string::npos);
}

TEST(JinjaErrors, UnclosedStringAndCommentPointAtTheirStart) {
  EXPECT_NE(error_of("ab\n {{ 'open }}").find("line 2 column 5: the string is not closed"), std::string::npos);
  EXPECT_NE(error_of("{# never closed").find("line 1 column 1: the comment is not closed"), std::string::npos);
}

TEST(JinjaErrors, GenerationInsideAMacroIsRefused) {
  const std::string message = error_of("{% macro m() %}{% generation %}x{% endgeneration %}{% endmacro %}{{ m() }}");
  EXPECT_NE(message.find("a generation block inside a macro or a block set is not supported"), std::string::npos)
      << message;
}

// ---- generation spans -------------------------------------------------------------------------------

TEST(JinjaGeneration, SpansAreTheBytesTheBlocksRendered) {
  jinja::Template t("{% for x in ['é', 'b'] %}<{% generation %}{{ x }}!{% endgeneration %}>{% endfor %}", "t");
  EXPECT_TRUE(t.has_generation_blocks());
  const jinja::Template::Output out = t.render({});
  EXPECT_EQ(out.text, "<é!><b!>");
  ASSERT_EQ(out.generation_spans.size(), 2u);
  EXPECT_EQ(out.text.substr(out.generation_spans[0].first, out.generation_spans[0].second - out.generation_spans[0].first), "é!");
  EXPECT_EQ(out.text.substr(out.generation_spans[1].first, out.generation_spans[1].second - out.generation_spans[1].first), "b!");
  EXPECT_FALSE(jinja::Template("{{ 'generation' }}", "t").has_generation_blocks());
}

}  // namespace
}  // namespace shardft
