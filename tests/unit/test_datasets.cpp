// Dataset files in trl's formats (JSONL and JSON arrays; conversations, messages, prompt/completion,
// text), role_map, skip_bad_samples, the weighted mixture of several files, and the recipe keys that
// drive them (datasets, role_map).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/common/scratch_dir_test.hpp"
#include "config/data_keys.hpp"
#include "config/recipe_schema.hpp"
#include "config/train_config.hpp"
#include "data/datasets.hpp"
#include "data/training_set.hpp"
#include "config/recipe_sections.hpp"

namespace shardft {
namespace {

namespace fs = std::filesystem;

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

class DatasetFiles : public testing_util::ScratchDirTest {
 protected:
  static std::string error_of(const std::function<void()>& action) {
    try {
      action();
    } catch (const DataError& e) {
      return e.what();
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  }
};

const char* const kQa = R"({"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]})";

// Conversations as "role:content|role:content" for compact expectations.
std::string flat(const Conversation& c) {
  std::string s;
  for (const Turn& t : c) s += (s.empty() ? "" : "|") + t.role + ":" + t.content;
  return s;
}

// ---- formats -----------------------------------------------------------------------------------

TEST_F(DatasetFiles, JsonArrayOfMixedFormats) {
  const std::string path = write("data.json",
                                 "\xEF\xBB\xBF  [\n"
                                 R"(  {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},)" "\n"
                                 R"(  {"messages": [{"role": "user", "content": "a [b] {c}, \"d\""}, {"role": "assistant", "content": "e"}], "id": 3},)" "\n"
                                 R"(  {"prompt": "p", "completion": "c", "extra": [1, {"x": "]"}]},)" "\n"
                                 R"(  {"text": "plain text"})" "\n"
                                 "]\n");
  const std::vector<Conversation> convs = read_dataset(path, {});
  ASSERT_EQ(convs.size(), 4u);
  EXPECT_EQ(flat(convs[0]), "user:hi|assistant:yo");
  EXPECT_EQ(flat(convs[1]), "user:a [b] {c}, \"d\"|assistant:e");
  EXPECT_EQ(flat(convs[2]), "user:p|assistant:c");
  EXPECT_EQ(flat(convs[3]), "text:plain text");
  EXPECT_TRUE(is_text_sample(convs[3]));
  EXPECT_EQ(read_dataset(write("empty_ok.json", "[\n" + std::string(kQa) + "\n]"), {}).size(), 1u);
}

TEST_F(DatasetFiles, TextFieldIsConfigurable) {
  const std::string path = write("t.jsonl", R"({"body": "hello", "text": 3})" "\n");
  DatasetOptions opt;
  opt.text_field = "body";
  const auto convs = read_dataset(path, opt);
  ASSERT_EQ(convs.size(), 1u);
  EXPECT_EQ(flat(convs[0]), "text:hello");
  EXPECT_CONTAINS(error_of([&] { read_dataset(path, {}); }), path + ":1: \"text\" must be a string, got number");
}

TEST_F(DatasetFiles, ConversationalPromptCompletion) {
  const std::string path = write(
      "pc.jsonl", R"({"prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], )"
                  R"("completion": [{"role": "assistant", "content": "a"}]})" "\n");
  EXPECT_EQ(flat(read_dataset(path, {})[0]), "system:s|user:q|assistant:a");
  const std::string mixed = write("pc2.jsonl", R"({"prompt": "q", "completion": [{"role": "assistant", "content": "a"}]})");
  EXPECT_CONTAINS(error_of([&] { read_dataset(mixed, {}); }),
                  mixed + ":1: \"prompt\" and \"completion\" must both be strings or both lists of messages");
}

TEST_F(DatasetFiles, RoleMapNamesOtherRoles) {
  const std::string path = write("roles.jsonl", R"({"conversations": [{"from": "narrator", "value": "n"}, )"
                                                R"({"from": "human", "value": "q"}, {"from": "bot", "value": "a"}]})");
  const std::string message = error_of([&] { read_dataset(path, {}); });
  EXPECT_EQ(message, path + ":1: conversations[0] has unknown role \"narrator\" (expected human, gpt, system, user or "
                            "assistant; the recipe key role_map maps others)");
  DatasetOptions opt;
  opt.role_map = {{"narrator", "system"}, {"bot", "assistant"}};
  EXPECT_EQ(flat(read_dataset(path, opt)[0]), "system:n|user:q|assistant:a");
}

// Each malformed case, in JSONL (line 3) and in a JSON array (line 4, record[1]).
TEST_F(DatasetFiles, EveryMalformedCaseNamesFileLineAndReason) {
  struct Case {
    const char* record;
    const char* reason;
  };
  const Case cases[] = {
      {R"({"messages": [)", "not valid JSON"},
      {R"({"conversations": [{"from": "human", "value": "x"}]} trailing)", "not valid JSON"},
      {R"({"id": 1})", "missing \"conversations\" (or \"messages\", \"prompt\" and \"completion\", or \"text\")"},
      {R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant"}]})", "messages[1] has no \"content\""},
      {R"({"prompt": "x"})", "has \"prompt\" or \"completion\" but no \"completion\""},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0] has unknown role \"robot\""},
      {R"({"messages": []})", "empty conversation"},
      {R"({"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "x"}]})",
       "conversation has no assistant (gpt) turn"},
      {R"({"messages": "hi"})", "\"messages\" must be an array, got string"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content must be a string, got number"},
      {R"({"prompt": 1, "completion": "c"})", "\"prompt\" must be a string (or a list of messages), got number"},
      {R"([1])", "expected a JSON object, got array"},
      {R"({"text": ""})", "\"text\" is empty"},
      {R"({"text": null})", "\"text\" must be a string, got null"},
      {R"({"text": "x", "n": 1e999})", "not valid JSON (number overflow parsing '1e999')"},  // found by fuzzing
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.record);
    const std::string jsonl = write("bad" + std::to_string(n) + ".jsonl",
                                    std::string(kQa) + "\n\n" + c.record + "\n" + kQa + "\n");
    const std::string line_message = error_of([&] { read_dataset(jsonl, {}); });
    EXPECT_EQ(line_message.rfind(jsonl + ":3: " + c.reason, 0), 0u) << line_message;
    const std::string array = write("bad" + std::to_string(n++) + ".json",
                                    std::string("[\n") + kQa + ",\n\n" + c.record + ",\n" + kQa + "\n]\n");
    const std::string message = error_of([&] { read_dataset(array, {}); });
    EXPECT_EQ(message.rfind(array + ":4: record[1]: ", 0), 0u) << message;
    // An unbalanced record swallows the rest of the array: its start is still named.
    const bool unbalanced = std::count(c.record, c.record + std::strlen(c.record), '[') !=
                            std::count(c.record, c.record + std::strlen(c.record), ']');
    EXPECT_CONTAINS(message, unbalanced ? "the JSON array is not closed" : c.reason);
  }
}

TEST_F(DatasetFiles, BrokenJsonArrays) {
  const std::string open = write("open.json", "[\n" + std::string(kQa) + ",\n" + kQa + "\n");
  EXPECT_EQ(error_of([&] { read_dataset(open, {}); }),
            open + ":3: record[1]: the JSON array is not closed (no ']' before the end of the file)");
  const std::string after = write("after.json", "[" + std::string(kQa) + "]\n{}\n");
  EXPECT_EQ(error_of([&] { read_dataset(after, {}); }), after + ":2: unexpected text after the closing ']' of the JSON array");
  const std::string empty = write("empty.json", " [ ] ");
  EXPECT_EQ(error_of([&] { read_dataset(empty, {}); }), empty + ": no samples");
}

// ---- skip_bad_samples --------------------------------------------------------------------------

TEST_F(DatasetFiles, SkipBadSamplesCountsAndKeepsTheFirstReasons) {
  std::string text;
  for (int i = 0; i < 20; ++i) text += (i % 3 == 1 ? std::string(R"({"messages": []})") : std::string(kQa)) + "\n";
  text += "not json\n";
  const std::string path = write("some_bad.jsonl", text);
  EXPECT_CONTAINS(error_of([&] { read_dataset(path, {}); }), path + ":2: empty conversation");

  DatasetOptions opt;
  opt.skip_bad_samples = true;
  DatasetFileReport report;
  const auto convs = read_dataset(path, opt, &report);
  EXPECT_EQ(convs.size(), 13u);
  EXPECT_EQ(report.records, 21);
  EXPECT_EQ(report.skipped, 8);
  EXPECT_EQ(report.samples(), 13);
  ASSERT_EQ(report.skip_reasons.size(), DatasetFileReport::kReasonsKept);
  EXPECT_EQ(report.skip_reasons[0], path + ":2: empty conversation");
  EXPECT_EQ(report.skip_reasons[4], path + ":14: empty conversation");
  EXPECT_EQ(describe_skips(report), "  skipped 8 bad records of " + path + "; the first:\n    " + path +
                                        ":2: empty conversation\n    " + path + ":5: empty conversation\n    " + path +
                                        ":8: empty conversation\n    " + path + ":11: empty conversation\n    " + path +
                                        ":14: empty conversation\n");
}

TEST_F(DatasetFiles, EveryRecordBadIsStillAnError) {
  DatasetOptions opt;
  opt.skip_bad_samples = true;
  const std::string jsonl = write("all_bad.jsonl", "{\n{\"text\": \"\"}\n");
  EXPECT_EQ(error_of([&] { read_dataset(jsonl, opt); }),
            jsonl + ": every one of its 2 records is malformed (skip_bad_samples skips some, not all); the first: " +
                jsonl + ":1: not valid JSON (column 2: syntax error while parsing object key - unexpected end of "
                        "input; expected string literal)");
  const std::string array = write("all_bad.json", R"([{"messages": []}])");
  EXPECT_CONTAINS(error_of([&] { read_dataset(array, opt); }), "every one of its 1 records is malformed");
}

// ---- mixing ------------------------------------------------------------------------------------

class DatasetMixing : public DatasetFiles {
 protected:
  // n conversations whose answer is "<tag><i>".
  std::string file_of(const std::string& name, const std::string& tag, int n) {
    std::string text;
    for (int i = 0; i < n; ++i) {
      text += R"({"prompt": "q", "completion": ")" + tag + std::to_string(i) + "\"}\n";
    }
    return write(name, text);
  }
  static std::map<std::string, int> answer_counts(const MixedDataset& m) {
    std::map<std::string, int> counts;
    for (const Conversation& c : m.samples) ++counts[c.back().content];
    return counts;
  }
};

TEST_F(DatasetMixing, WeightsScaleEachFileDeterministically) {
  const std::string a = file_of("a.jsonl", "a", 10), b = file_of("b.jsonl", "b", 7), c = file_of("c.jsonl", "c", 4);
  const std::vector<DatasetSpec> specs = {{a, 2.0}, {b, 0.5}, {c, 1.5}};
  const MixedDataset m = mix_datasets(specs, {}, 42);
  // round(10*2) = 20: every a twice; round(7*0.5) = round(3.5) = 4 of the 7 b; round(4*1.5) = 6: every c once, 2 twice.
  ASSERT_EQ(m.parts.size(), 3u);
  EXPECT_EQ(m.parts[0].used, 20);
  EXPECT_EQ(m.parts[1].used, 4);
  EXPECT_EQ(m.parts[2].used, 6);
  EXPECT_EQ(m.samples.size(), 30u);
  const auto counts = answer_counts(m);
  int b_seen = 0, c_twice = 0;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(counts.at("a" + std::to_string(i)), 2);
  for (int i = 0; i < 7; ++i) b_seen += counts.count("b" + std::to_string(i)) ? counts.at("b" + std::to_string(i)) : 0;
  for (int i = 0; i < 4; ++i) c_twice += counts.at("c" + std::to_string(i)) == 2;
  EXPECT_EQ(b_seen, 4);
  EXPECT_EQ(c_twice, 2);
  // Files in order, whole copies first, the drawn part in file order.
  EXPECT_EQ(m.samples[0].back().content, "a0");
  EXPECT_EQ(m.samples[10].back().content, "a0");
  EXPECT_EQ(m.samples[20].back().content.substr(0, 1), "b");

  // Same seed, same mixture; another seed draws other fractional parts.
  const MixedDataset again = mix_datasets(specs, {}, 42);
  std::vector<std::string> first, second;
  for (const auto& conv : m.samples) first.push_back(conv.back().content);
  for (const auto& conv : again.samples) second.push_back(conv.back().content);
  EXPECT_EQ(first, second);
  bool differs = false;
  for (std::uint64_t seed = 1; seed < 20 && !differs; ++seed) differs = answer_counts(mix_datasets(specs, {}, seed)) != counts;
  EXPECT_TRUE(differs);

  EXPECT_EQ(describe_mixture(m),
            "dataset " + a + ": 10 records, 10 samples; weight 2.0 -> 20 samples\n" + "dataset " + b +
                ": 7 records, 7 samples; weight 0.5 -> 4 samples\n" + "dataset " + c +
                ": 4 records, 4 samples; weight 1.5 -> 6 samples\n" + "datasets mixed: 30 training samples from 3 files\n");
}

TEST_F(DatasetMixing, OneFileWithWeightOneIsTheFileAsItIs) {
  const std::string a = file_of("a.jsonl", "a", 5);
  const MixedDataset m = mix_datasets({{a, 1.0}}, {}, 7);
  ASSERT_EQ(m.samples.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(m.samples[i].back().content, "a" + std::to_string(i));
  EXPECT_EQ(describe_mixture(m), "dataset " + a + ": 5 records, 5 samples; weight 1.0 -> 5 samples\n");
}

TEST_F(DatasetMixing, SkippedRecordsAndWeightsThatLeaveNothing) {
  const std::string a = write("a.jsonl", std::string(kQa) + "\nnot json\n" + kQa + "\n");
  const std::string b = file_of("b.json", "b", 3);
  DatasetOptions opt;
  opt.skip_bad_samples = true;
  const MixedDataset m = mix_datasets({{a, 1.0}, {b, 1.0}}, opt, 1);
  EXPECT_EQ(m.samples.size(), 5u);
  EXPECT_CONTAINS(describe_mixture(m), "dataset " + a + ": 3 records, 2 samples, 1 skipped; weight 1.0 -> 2 samples\n");
  EXPECT_CONTAINS(describe_mixture(m), "  skipped 1 bad record of " + a + ":\n    " + a + ":2: not valid JSON");
  EXPECT_EQ(error_of([&] { mix_datasets({{b, 0.1}}, {}, 1); }),
            b + ": weight 0.1 of its 3 samples leaves none in the mixture; raise the weight or drop the file");
}

TEST_F(DatasetMixing, RecipeDrivesTheMixture) {
  const std::string a = file_of("a.jsonl", "a", 4), b = file_of("b.jsonl", "b", 2);
  const std::string recipe = write("r.yaml", "datasets:\n  - {path: " + a + ", weight: 0.5}\n  - path: " + b +
                                                 "\n    weight: 3\nrole_map: {bot: assistant}\nskip_bad_samples: true\n"
                                                 "dataset_text_field: body\n");
  const TrainConfig cfg = load_train_config(recipe, {});
  EXPECT_EQ(cfg.datasets, R"([{"path": ")" + a + R"(", "weight": 0.5}, {"path": ")" + b + R"(", "weight": 3.0}])");
  EXPECT_EQ(cfg.role_map, R"({"bot": "assistant"})");
  const DatasetOptions opt = dataset_options(cfg);
  EXPECT_EQ(opt.text_field, "body");
  EXPECT_TRUE(opt.skip_bad_samples);
  EXPECT_EQ(opt.role_map.at("bot"), "assistant");
  const TrainingSetConfig section = training_set_config(cfg);
  const MixedDataset m = mix_datasets(section.datasets, section.options, section.seed);
  EXPECT_EQ(m.samples.size(), 2u + 6u);
  // Without `datasets`, dataset_path with weight 1.
  const TrainConfig single = load_train_config("", {"--dataset_path=" + a});
  ASSERT_EQ(training_datasets(single).size(), 1u);
  EXPECT_EQ(training_datasets(single)[0].path, a);
  EXPECT_EQ(training_datasets(single)[0].weight, 1.0);
}

// ---- the recipe keys ---------------------------------------------------------------------------

TEST_F(DatasetFiles, StructuredKeysAcceptYamlFlagsAndJson) {
  EXPECT_EQ(canonical_datasets_text("[a.jsonl, {path: 'b c.json', weight: 2}]"),
            R"([{"path": "a.jsonl", "weight": 1.0}, {"path": "b c.json", "weight": 2.0}])");
  EXPECT_EQ(canonical_datasets_text("a.jsonl"), R"([{"path": "a.jsonl", "weight": 1.0}])");
  EXPECT_EQ(canonical_datasets_text(""), "");
  EXPECT_EQ(canonical_datasets_text(R"([{"path": "x\"y", "weight": 0.25}])"), R"([{"path": "x\"y", "weight": 0.25}])");
  EXPECT_EQ(canonical_role_map_text("{tool: user, bot: assistant}"), R"({"bot": "assistant", "tool": "user"})");
  EXPECT_EQ(canonical_role_map_text("{}"), "");

  const TrainConfig flags = load_train_config("", {"--datasets", "[{path: a.jsonl, weight: 1.5}]", "--role_map={bot: assistant}"});
  EXPECT_EQ(parse_datasets_text(flags.datasets).at(0).weight, 1.5);
  EXPECT_EQ(role_map_of(flags).at("bot"), "assistant");

  // to_yaml writes them as flow collections that read back the same.
  const std::string path = write("round.yaml", to_yaml(flags));
  EXPECT_CONTAINS(to_yaml(flags), "datasets: [{\"path\": \"a.jsonl\", \"weight\": 1.5}]\n");
  const TrainConfig again = load_train_config(path, {});
  EXPECT_EQ(again.datasets, flags.datasets);
  EXPECT_EQ(again.role_map, flags.role_map);
}

TEST_F(DatasetFiles, StructuredKeyErrorsNameTheKeyAndItem) {
  const auto config_error = [&](const std::string& yaml) {
    const std::string path = write("bad.yaml", yaml);
    return error_of([&] { load_train_config(path, {}); });
  };
  EXPECT_CONTAINS(config_error("datasets:\n  - {path: a.jsonl, weight: -1}\n"),
                  "bad.yaml:1: key 'datasets' item 1: weight must be a number > 0, got '-1'");
  EXPECT_CONTAINS(config_error("datasets: [{path: a.jsonl, wieght: 2}]\n"),
                  "key 'datasets' item 1: unknown field 'wieght' (expected path and weight)");
  EXPECT_CONTAINS(config_error("datasets: [{weight: 2}]\n"), "key 'datasets' item 1: has no path");
  EXPECT_CONTAINS(config_error("datasets: {path: a.jsonl}\n"), "key 'datasets' expects a list of {path: FILE, weight: W}");
  EXPECT_CONTAINS(config_error("datasets: []\n"), "key 'datasets' lists no dataset");
  EXPECT_CONTAINS(config_error("role_map: {bot: robot}\n"),
                  "bad.yaml:1: key 'role_map' maps role 'bot' to 'robot'; expected system, user or assistant");
  EXPECT_CONTAINS(config_error("role_map: [bot]\n"), "key 'role_map' expects a mapping");
  EXPECT_CONTAINS(error_of([&] { load_train_config("", {"--datasets=[{path: a, weight: x}]"}); }),
                  "--datasets: key 'datasets' item 1: weight must be a number > 0, got 'x'");
  EXPECT_CONTAINS(config_error("chat_template: vicuna\n"),
                  "key 'chat_template' must be auto, shardft, chatml, llama3, plain, or the path of a .jinja file or a "
                  "tokenizer_config.json, got 'vicuna'");
  TrainConfig cfg;
  cfg.datasets = "[{path: a, weight: 0}]";  // set in code, caught by validate
  EXPECT_CONTAINS(error_of([&] { validate(cfg); }), "key 'datasets' item 1: weight must be a number > 0");
}

}  // namespace
}  // namespace shardft
