#include "config/data_keys.hpp"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "config/recipe_schema.hpp"

namespace shardft {
namespace {

const char* kind_of(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null: return "nothing";
    default: return "a scalar";
  }
}

// "" and blank text mean the key is unset; anything else must be YAML (JSON is YAML too).
YAML::Node load(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("is not valid YAML or JSON (" + e.msg + ")");
  }
}

bool blank(const std::string& text) { return text.find_first_not_of(" \t\r\n") == std::string::npos; }

std::string json_string(const std::string& s) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument("holds text that is not UTF-8");
  }
}

double weight_of(const YAML::Node& node, const std::string& item) {
  if (!node.IsScalar()) throw std::invalid_argument(item + ": weight must be a number > 0, got " + kind_of(node));
  const std::string text = node.Scalar();
  char* end = nullptr;
  const double w = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(w) || !(w > 0)) {
    throw std::invalid_argument(item + ": weight must be a number > 0, got '" + text + "'");
  }
  return w;
}

}  // namespace

std::vector<DatasetSpec> parse_datasets_text(const std::string& text) {
  if (blank(text)) return {};
  const YAML::Node root = load(text);
  std::vector<DatasetSpec> out;
  // A lone path is a mixture of one (handy on the command line: --datasets data/a.jsonl).
  if (root.IsScalar()) {
    if (root.Scalar().empty()) return {};
    return {{root.Scalar(), 1.0}};
  }
  if (!root.IsSequence()) {
    throw std::invalid_argument("expects a list of {path: FILE, weight: W} entries, got " + std::string(kind_of(root)));
  }
  if (root.size() == 0) throw std::invalid_argument("lists no dataset");
  for (std::size_t i = 0; i < root.size(); ++i) {
    const YAML::Node item = root[i];
    const std::string where = "item " + std::to_string(i + 1);
    DatasetSpec spec;
    if (item.IsScalar()) {
      spec.path = item.Scalar();
    } else if (item.IsMap()) {
      bool has_path = false;
      for (const auto& entry : item) {
        const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
        if (key == "path") {
          if (!entry.second.IsScalar()) {
            throw std::invalid_argument(where + ": path must be a file name, got " + kind_of(entry.second));
          }
          spec.path = entry.second.Scalar();
          has_path = true;
        } else if (key == "weight") {
          spec.weight = weight_of(entry.second, where);
        } else {
          throw std::invalid_argument(where + ": unknown field '" + key + "' (expected path and weight)");
        }
      }
      if (!has_path) throw std::invalid_argument(where + ": has no path");
    } else {
      throw std::invalid_argument(where + ": expected {path: FILE, weight: W} or a file name, got " +
                                  kind_of(item));
    }
    if (spec.path.empty()) throw std::invalid_argument(where + ": path is empty");
    out.push_back(spec);
  }
  return out;
}

std::string canonical_datasets_text(const std::string& text) {
  const std::vector<DatasetSpec> specs = parse_datasets_text(text);
  if (specs.empty()) return "";
  std::string out = "[";
  for (std::size_t i = 0; i < specs.size(); ++i) {
    out += (i ? ", " : "") + std::string("{\"path\": ") + json_string(specs[i].path) +
           ", \"weight\": " + format_double(specs[i].weight) + "}";
  }
  return out + "]";
}

std::map<std::string, std::string> parse_role_map_text(const std::string& text) {
  if (blank(text)) return {};
  const YAML::Node root = load(text);
  if (root.IsNull()) return {};
  if (!root.IsMap()) {
    throw std::invalid_argument("expects a mapping of dataset roles to system, user or assistant, got " +
                                std::string(kind_of(root)));
  }
  std::map<std::string, std::string> out;
  for (const auto& entry : root) {
    if (!entry.first.IsScalar() || entry.first.Scalar().empty()) {
      throw std::invalid_argument("role names must be non-empty plain names");
    }
    const std::string from = entry.first.Scalar();
    const std::string to = entry.second.IsScalar() ? entry.second.Scalar() : "";
    if (to != "system" && to != "user" && to != "assistant") {
      throw std::invalid_argument("maps role '" + from + "' to " +
                                  (entry.second.IsScalar() ? "'" + to + "'" : std::string(kind_of(entry.second))) +
                                  "; expected system, user or assistant");
    }
    if (!out.emplace(from, to).second) throw std::invalid_argument("maps role '" + from + "' twice");
  }
  return out;
}

std::string canonical_role_map_text(const std::string& text) {
  const std::map<std::string, std::string> roles = parse_role_map_text(text);
  if (roles.empty()) return "";
  std::string out = "{";
  for (const auto& [from, to] : roles) out += (out.size() > 1 ? ", " : "") + json_string(from) + ": " + json_string(to);
  return out + "}";
}

std::vector<DatasetSpec> training_datasets(const TrainConfig& cfg) {
  std::vector<DatasetSpec> specs = parse_datasets_text(cfg.datasets);
  if (specs.empty()) specs.push_back({cfg.dataset_path, 1.0});
  return specs;
}

std::map<std::string, std::string> role_map_of(const TrainConfig& cfg) { return parse_role_map_text(cfg.role_map); }

}  // namespace shardft
