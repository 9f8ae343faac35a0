#include "config/lr_scheduler_kwargs.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <vector>

#include "config/recipe_schema.hpp"

namespace shardft {
namespace {

double number_of(const YAML::Node& node, const std::string& key) {
  const std::string text = node.IsScalar() ? node.Scalar() : "";
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v)) {
    throw std::invalid_argument(key + " must be a number, got " + (node.IsScalar() ? "'" + text + "'" : "a structure"));
  }
  return v;
}

long count_of(const YAML::Node& node, const std::string& key) {
  const double v = number_of(node, key);
  if (v < 0 || v != std::floor(v) || v > 1e15) throw std::invalid_argument(key + " must be a whole number >= 0");
  return static_cast<long>(v);
}

std::string shape_of(const YAML::Node& node, const std::string& key) {
  const std::string v = node.IsScalar() ? node.Scalar() : "";
  if (v != "linear" && v != "cosine" && v != "1-sqrt") {
    throw std::invalid_argument(key + " must be linear, cosine or 1-sqrt, got '" + v + "'");
  }
  return v;
}

}  // namespace

bool LrSchedulerKwargs::empty() const {
  return !num_cycles && !min_lr && !min_lr_rate && !min_lr_ratio && !num_stable_steps && !num_decay_steps &&
         warmup_type.empty() && decay_type.empty();
}

LrSchedulerKwargs parse_lr_scheduler_kwargs_text(const std::string& text) {
  LrSchedulerKwargs k;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return k;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("is not valid YAML or JSON (" + e.msg + ")");
  }
  if (root.IsNull()) return k;
  if (!root.IsMap()) throw std::invalid_argument("expects a mapping such as {num_cycles: 3}");
  for (const auto& entry : root) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "";
    const YAML::Node& v = entry.second;
    if (key == "num_cycles") {
      k.num_cycles = number_of(v, key);
      if (!(*k.num_cycles > 0)) throw std::invalid_argument("num_cycles must be > 0");
    } else if (key == "min_lr") {
      k.min_lr = number_of(v, key);
    } else if (key == "min_lr_rate") {
      k.min_lr_rate = number_of(v, key);
    } else if (key == "min_lr_ratio") {
      k.min_lr_ratio = number_of(v, key);
      if (*k.min_lr_ratio < 0 || *k.min_lr_ratio > 1) throw std::invalid_argument("min_lr_ratio must be in [0, 1]");
    } else if (key == "num_stable_steps") {
      k.num_stable_steps = count_of(v, key);
    } else if (key == "num_decay_steps") {
      k.num_decay_steps = count_of(v, key);
    } else if (key == "warmup_type") {
      k.warmup_type = shape_of(v, key);
    } else if (key == "decay_type") {
      k.decay_type = shape_of(v, key);
    } else {
      throw std::invalid_argument("unknown setting '" + key + "' (known: num_cycles, min_lr, min_lr_rate, min_lr_ratio, "
                                  "num_stable_steps, num_decay_steps, warmup_type, decay_type)");
    }
  }
  return k;
}

std::string canonical_lr_scheduler_kwargs_text(const std::string& text) {
  const LrSchedulerKwargs k = parse_lr_scheduler_kwargs_text(text);
  if (k.empty()) return "";
  std::map<std::string, std::string> numbers;  // sorted, as the other structured keys write theirs
  if (k.num_cycles) numbers["num_cycles"] = format_double(*k.num_cycles);
  if (k.min_lr) numbers["min_lr"] = format_double(*k.min_lr);
  if (k.min_lr_rate) numbers["min_lr_rate"] = format_double(*k.min_lr_rate);
  if (k.min_lr_ratio) numbers["min_lr_ratio"] = format_double(*k.min_lr_ratio);
  if (k.num_stable_steps) numbers["num_stable_steps"] = std::to_string(*k.num_stable_steps);
  if (k.num_decay_steps) numbers["num_decay_steps"] = std::to_string(*k.num_decay_steps);
  if (!k.warmup_type.empty()) numbers["warmup_type"] = "\"" + k.warmup_type + "\"";
  if (!k.decay_type.empty()) numbers["decay_type"] = "\"" + k.decay_type + "\"";
  std::string out = "{";
  for (const auto& [key, value] : numbers) out += (out.size() > 1 ? ", " : "") + ("\"" + key + "\": " + value);
  return out + "}";
}

std::string lr_scheduler_kwargs_problem(const std::string& type, const LrSchedulerKwargs& k) {
  std::vector<std::string> given;
  if (k.num_cycles) given.push_back("num_cycles");
  if (k.min_lr) given.push_back("min_lr");
  if (k.min_lr_rate) given.push_back("min_lr_rate");
  if (k.min_lr_ratio) given.push_back("min_lr_ratio");
  if (k.num_stable_steps) given.push_back("num_stable_steps");
  if (k.num_decay_steps) given.push_back("num_decay_steps");
  if (!k.warmup_type.empty()) given.push_back("warmup_type");
  if (!k.decay_type.empty()) given.push_back("decay_type");
  const std::map<std::string, std::vector<std::string>> takes = {
      {"cosine", {"num_cycles"}},
      {"cosine_with_min_lr", {"num_cycles", "min_lr", "min_lr_rate"}},
      {"cosine_with_restarts", {"num_cycles"}},
      {"warmup_stable_decay",
       {"num_cycles", "min_lr_ratio", "num_stable_steps", "num_decay_steps", "warmup_type", "decay_type"}},
  };
  const auto it = takes.find(type);
  for (const std::string& name : given) {
    if (it == takes.end() || std::find(it->second.begin(), it->second.end(), name) == it->second.end()) {
      std::string list;
      if (it != takes.end()) {
        for (const std::string& t : it->second) list += (list.empty() ? "" : ", ") + t;
      }
      return "lr_scheduler_type " + type + " takes " + (list.empty() ? std::string("no lr_scheduler_kwargs") : list) +
             "; '" + name + "' does not apply to it";
    }
  }
  if (type == "cosine_with_restarts" && k.num_cycles && *k.num_cycles != std::floor(*k.num_cycles)) {
    return "cosine_with_restarts: num_cycles counts restarts, a whole number";
  }
  if (type == "warmup_stable_decay" && !k.num_decay_steps) {
    return "lr_scheduler_type warmup_stable_decay needs lr_scheduler_kwargs {num_decay_steps: N} (HF's required "
           "argument): the steps of its final decay";
  }
  return "";
}

}  // namespace shardft
