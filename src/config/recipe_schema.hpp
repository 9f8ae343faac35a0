#pragma once
// The recipe's keys as data. One RecipeKey per key drives YAML parsing, --key=value overrides,
// per-key validation, to_yaml and help text, so adding a key to TrainConfig is one table row.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "config/train_config.hpp"

namespace shardft {

// Where a key's value lives inside a TrainConfig; the pointer's type is the key's value type.
using ConfigField = std::variant<int*, double*, bool*, std::string*, std::uint64_t*>;

// The numbers a key accepts: an interval with either end open, closed or unbounded, plus
// optionally -1 as a sentinel ("max_steps: -1" means "run by epochs").
struct ValueRange {
  double min = -HUGE_VAL;
  bool min_inclusive = true;
  double max = HUGE_VAL;
  bool max_inclusive = true;
  bool allows_minus_one = false;

  bool contains(double value) const;  // false for NaN
  bool is_unbounded() const;
  std::string describe() const;       // "in [0, 1)", ">= 1", "> 0", "-1 or >= 1"
};

ValueRange at_least(double min);
ValueRange greater_than(double min);
ValueRange closed_interval(double min, double max);      // [min, max]
ValueRange half_open_interval(double min, double max);   // [min, max)
ValueRange minus_one_or_at_least(double min);

struct RecipeKey {
  std::string name;                    // as written in recipes and --flags (trl / HF names)
  bool is_model_key = false;           // HF config.json key: may also sit under `model:`
  std::function<ConfigField(TrainConfig&)> field;
  ValueRange range;                    // numeric keys only
  std::vector<std::string> choices;    // string keys only; empty: any string
  bool must_be_non_empty = false;      // string keys only
  std::vector<std::string> aliases;    // other names recipes use for the same key
  std::string doc;
  std::string group;                   // one of recipe_key_groups(): where help lists it
  // Structured string keys (a list or a mapping held as canonical text): turns any accepted text into
  // the canonical one, throwing std::invalid_argument with the reason. A recipe may then give the key
  // a YAML list or mapping, and to_yaml writes the canonical text as it is. Empty: a plain string key.
  std::function<std::string(const std::string&)> normalize;
  // Keys that also take "auto" (bf16, logits_chunk_tokens): the companion flag it sets, the key itself
  // left false (a bool) or at its default until the run resolves it (resolve_bf16_auto,
  // resolve_logits_chunk_auto in config/train_config.hpp); value_text writes "auto" until then.
  bool TrainConfig::*auto_flag = nullptr;

  // Chained modifiers, so each table row reads as one sentence.
  RecipeKey in(ValueRange r) const;
  RecipeKey one_of(std::vector<std::string> allowed) const;
  RecipeKey non_empty() const;
  RecipeKey also_named(std::string alias) const;
  RecipeKey structured(std::function<std::string(const std::string&)> canonical) const;
  RecipeKey or_auto(bool TrainConfig::*flag) const;
};

// Every key, in the order to_yaml writes them.
const std::vector<RecipeKey>& recipe_keys();

// The groups help lists the keys in, in that order: model, data, training, evaluation, logging,
// checkpoints, parallel, LoRA.
const std::vector<std::string>& recipe_key_groups();

// The key called `name` (or one of its aliases); nullptr when there is none.
const RecipeKey* find_recipe_key(const std::string& name);

// The key name closest to `unknown` by edit distance when it is close enough to be a typo,
// otherwise "".
std::string closest_recipe_key(const std::string& unknown);

// The key's current value as plain text ("0.001", "true", "runs/x"); strings unquoted.
std::string value_text(const TrainConfig& cfg, const RecipeKey& key);

// The key's current value as a number, for range checks; NaN for string and bool keys.
double numeric_value(const TrainConfig& cfg, const RecipeKey& key);

bool is_string_key(const RecipeKey& key);
bool is_bool_key(const RecipeKey& key);

// What the key's type accepts, for messages: "a number", "an integer", "true or false", ...
std::string expected_value_text(const RecipeKey& key);

// Parses `text` as the key's type and stores it (structured keys: in canonical form). Throws ConfigError
// "<where>: key 'k' expects <type>, got '<text>'" when it does not parse.
void set_value_from_text(TrainConfig& cfg, const RecipeKey& key, const std::string& text,
                         const std::string& where);

// Shortest text that reads back as exactly `value`, always with a '.' or exponent so YAML
// readers other than ours also see a float ("0.001", "10000.0", "1.0e-08").
std::string format_double(double value);

}  // namespace shardft
