#include "config/rope_scaling_json.hpp"

#include <set>

#include "config/train_config.hpp"

namespace shardft {
namespace {

using nlohmann::json;

const char* const kTypes = "default, linear, dynamic, yarn or llama3";

class Block {
 public:
  Block(const json& j, std::string where) : j_(j), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw ConfigError(where_ + "rope_scaling" + (key.empty() ? "" : "." + key) + ": " + why);
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }

  double number(const std::string& key, double min, bool min_inclusive) const {
    if (!has(key)) fail(key, "missing (expected a number " + bound(min, min_inclusive) + ")");
    const json& v = j_.at(key);
    if (!v.is_number() || (min_inclusive ? v.get<double>() < min : v.get<double>() <= min)) {
      fail(key, "expected a number " + bound(min, min_inclusive) + ", got " + v.dump());
    }
    return v.get<double>();
  }
  double number(const std::string& key, double min, bool min_inclusive, double fallback) const {
    return has(key) ? number(key, min, min_inclusive) : fallback;
  }
  int positive_int(const std::string& key, int fallback, bool required) const {
    if (!has(key)) {
      if (required) fail(key, "missing (expected a positive integer)");
      return fallback;
    }
    const json& v = j_.at(key);
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 1LL << 30) {
      fail(key, "expected a positive integer, got " + v.dump());
    }
    return static_cast<int>(v.get<long long>());
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_.at(key).is_boolean()) fail(key, "expected true or false, got " + j_.at(key).dump());
    return j_.at(key).get<bool>();
  }
  // Every key must be one the type reads: an ignored key would change nothing here but would change
  // the math in another transformers version or in the model's own code.
  void only(const std::string& type, const std::set<std::string>& keys) const {
    for (const auto& kv : j_.items()) {
      if (kv.key() == "rope_type" || kv.key() == "type" || keys.count(kv.key())) continue;
      std::string expected;
      for (const auto& k : keys) expected += (expected.empty() ? "" : ", ") + k;
      fail(kv.key(), "is not a " + type + " parameter (expected " + (expected.empty() ? "none" : expected) + ")");
    }
  }

 private:
  static std::string bound(double min, bool inclusive) {
    return std::string(inclusive ? ">= " : "> ") + std::to_string(static_cast<int>(min));  // bounds are 0 or 1
  }
  const json& j_;
  std::string where_;
};

}  // namespace

RopeScaling parse_rope_scaling(const json& j, const std::string& where) {
  RopeScaling s;
  if (j.is_null()) return s;
  const Block b(j, where);
  if (!j.is_object()) b.fail("", "expected an object or null, got " + j.dump());
  // transformers reads "rope_type" first and falls back to the older "type".
  s.type_key = j.contains("rope_type") ? "rope_type" : "type";
  if (!b.has(s.type_key)) b.fail("rope_type", std::string("missing (expected ") + kTypes + ")");
  if (!j.at(s.type_key).is_string()) {
    b.fail(s.type_key, "expected a string, got " + j.at(s.type_key).dump());
  }
  const std::string name = j.at(s.type_key).get<std::string>();
  for (const char* known : {"default", "linear", "dynamic", "yarn", "llama3"}) {
    if (name == known) s.type = known;
  }
  if (s.type != name) b.fail(s.type_key, json(name).dump() + " is not supported (expected " + kTypes + ")");
  if (s.type == "default") {
    b.only(std::string(s.type), {});
  } else if (s.type == "linear") {
    b.only(std::string(s.type), {"factor"});
    s.factor = b.number("factor", 1.0, true);
  } else if (s.type == "dynamic") {
    b.only(std::string(s.type), {"factor", "original_max_position_embeddings"});
    s.factor = b.number("factor", 1.0, true);
    s.original_max_position_embeddings = b.positive_int("original_max_position_embeddings", 0, false);
  } else if (s.type == "llama3") {
    b.only(std::string(s.type), {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
    s.factor = b.number("factor", 1.0, true);
    s.low_freq_factor = b.number("low_freq_factor", 0.0, false);
    s.high_freq_factor = b.number("high_freq_factor", 0.0, false);
    if (s.high_freq_factor <= s.low_freq_factor) {
      b.fail("high_freq_factor", "must be greater than low_freq_factor " + json(s.low_freq_factor).dump() + ", got " +
                                     json(s.high_freq_factor).dump());
    }
    s.original_max_position_embeddings = b.positive_int("original_max_position_embeddings", 0, true);
  } else if (s.type == "yarn") {
    b.only(std::string(s.type), {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
                    "mscale", "mscale_all_dim", "truncate"});
    s.factor = b.number("factor", 1.0, true);
    s.original_max_position_embeddings = b.positive_int("original_max_position_embeddings", 0, false);
    s.beta_fast = b.number("beta_fast", 0.0, false, 32.0);
    s.beta_slow = b.number("beta_slow", 0.0, false, 1.0);
    s.attention_factor = b.number("attention_factor", 0.0, false, 0.0);
    s.mscale = b.number("mscale", 0.0, true, 0.0);
    s.mscale_all_dim = b.number("mscale_all_dim", 0.0, true, 0.0);
    s.truncate = b.boolean("truncate", true);
  }
  return s;
}

json rope_scaling_json(const RopeScaling& s) {
  if (s.plain()) return nullptr;
  json j = {{s.type_key, std::string(s.type)}, {"factor", s.factor}};
  if (s.original_max_position_embeddings > 0) {
    j["original_max_position_embeddings"] = s.original_max_position_embeddings;
  }
  if (s.type == "llama3") {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
  } else if (s.type == "yarn") {
    j["beta_fast"] = s.beta_fast;
    j["beta_slow"] = s.beta_slow;
    if (s.attention_factor > 0) j["attention_factor"] = s.attention_factor;
    if (s.mscale > 0) j["mscale"] = s.mscale;
    if (s.mscale_all_dim > 0) j["mscale_all_dim"] = s.mscale_all_dim;
    if (!s.truncate) j["truncate"] = false;
  }
  return j;
}

}  // namespace shardft
