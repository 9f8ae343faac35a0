#pragma once
// Reading tokenizer.json with complaints that name the file, the JSON key and what is supported; shared
// by bpe_load.cpp (model, added tokens) and bpe_load_steps.cpp (normalizer, pre-tokenizer, decoder).
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/bpe_internal.hpp"
#include "io/data_error.hpp"

namespace shardft::bpe {

using json = nlohmann::json;

inline std::string kind_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "a list";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    default:
      return "a number";
  }
}

inline std::string shown(const json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Reads one tokenizer.json, every complaint naming the file and the key.
struct Reader {
  std::string file;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw DataError(file + ": " + key + " " + what);
  }
  static const json& at(const json& obj, const char* key) {
    static const json null_value;
    const auto it = obj.find(key);
    return it == obj.end() ? null_value : *it;
  }
  const json& object(const json& obj, const std::string& path, const char* key, const std::string& expected) const {
    const json& j = at(obj, key);
    if (j.is_null()) fail(path + key, "is missing (expected " + expected + ")");
    if (!j.is_object()) fail(path + key, "is " + kind_of(j) + " (expected " + expected + ")");
    return j;
  }
  bool boolean(const json& obj, const std::string& path, const char* key, bool fallback) const {
    const json& j = at(obj, key);
    if (j.is_null()) return fallback;
    if (!j.is_boolean()) fail(path + key, "is " + kind_of(j) + " (expected true or false)");
    return j.get<bool>();
  }
  std::string type(const json& obj, const std::string& path) const {
    if (!obj.is_object())
      fail(path.empty() ? "(top level)" : path.substr(0, path.size() - 1),
           "is " + kind_of(obj) + " (expected an object with a \"type\")");
    const json& t = at(obj, "type");
    if (!t.is_string()) fail(path + "type", t.is_null() ? "is missing" : "is " + kind_of(t) + " (expected a string)");
    return t.get<std::string>();
  }
  [[noreturn]] void unsupported(const std::string& path, const std::string& type, const std::string& expected) const {
    fail(path + "type", "\"" + type + "\" is not supported (expected " + expected + ")");
  }
  // Flattens nested "Sequence"s: the steps with their key paths.
  void flatten(const json& j, const std::string& path, const char* list_key,
               std::vector<std::pair<const json*, std::string>>& steps) const {
    if (type(j, path) != "Sequence") {
      steps.emplace_back(&j, path);
      return;
    }
    const json& list = at(j, list_key);
    if (!list.is_array()) fail(path + list_key, "is " + kind_of(list) + " (expected a list)");
    for (std::size_t i = 0; i < list.size(); ++i) {
      flatten(list[i], path + list_key + "[" + std::to_string(i) + "].", list_key, steps);
    }
  }
};

inline std::string key_of(const std::string& path) { return path.empty() ? path : path.substr(0, path.size() - 1); }

// The normalizer, pre-tokenizer, decoder and post-processor of doc into spec (bpe_load_steps.cpp);
// spec.byte_level is set first, from whether the pre-tokenizer or the decoder is ByteLevel.
void read_pipeline(const Reader& rd, const nlohmann::json& doc, BpeSpec& spec);

}  // namespace shardft::bpe
