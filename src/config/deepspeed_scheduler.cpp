#include "config/deepspeed_scheduler.hpp"

#include <string>
#include <vector>

#include "config/recipe_schema.hpp"

namespace shardft {
namespace {

using Json = nlohmann::ordered_json;

// What an explicit value must be, as DeepSpeed's constructors accept it.
enum class Value {
  rate,           // a number (DeepSpeed also takes a list per parameter group; shardft has one group)
  positive_int,   // warmup_num_steps: DeepSpeed raises ValueError unless a positive int
  step_count,     // total_num_steps: the run's length, a whole number >= 1
  warmup_type,    // "log" or "linear"
  last_iteration  // last_batch_iteration: only DeepSpeed's -1 (a fresh schedule)
};

struct Param {
  const char* name;
  Value value;
  std::vector<std::string> recipe;  // the recipe keys it sets (the first) or, when "auto", keeps
  const char* absent;               // DeepSpeed's default when the block leaves it out; "": none to apply
};

struct SchedulerType {
  const char* name;      // DeepSpeed's class name, matched with case as DeepSpeed does
  const char* schedule;  // lr_scheduler_type
  const char* note;
  std::vector<Param> params;
};

const Param kWarmupMinLr{"warmup_min_lr", Value::rate, {"warmup_min_lr"}, "0"};
const Param kWarmupNumSteps{"warmup_num_steps", Value::positive_int, {"warmup_steps", "warmup_ratio"}, "1000"};
const Param kWarmupType{"warmup_type", Value::warmup_type, {"warmup_type"}, "log"};
const Param kTotalNumSteps{"total_num_steps", Value::step_count, {"max_steps", "num_train_epochs"}, ""};
const Param kLastIteration{"last_batch_iteration", Value::last_iteration, {}, ""};

const std::vector<SchedulerType>& scheduler_types() {
  static const std::vector<SchedulerType> types = {
      {"WarmupLR",
       "ds_warmup",
       "DeepSpeed's WarmupLR as its engine steps it: the first step at warmup_min_lr, then warm-up to "
       "warmup_max_lr",
       // Since DeepSpeed 0.19 WarmupLR's warmup_max_lr defaults to the optimizer's lr: the recipe's.
       {kWarmupMinLr, {"warmup_max_lr", Value::rate, {"learning_rate"}, ""}, kWarmupNumSteps, kWarmupType,
        kLastIteration}},
      {"WarmupDecayLR",
       "ds_warmup_decay",
       "DeepSpeed's WarmupDecayLR as its engine steps it: the first step at warmup_min_lr, warm-up to "
       "warmup_max_lr, then a linear decay toward warmup_min_lr at total_num_steps",
       {kTotalNumSteps, kWarmupMinLr, {"warmup_max_lr", Value::rate, {"learning_rate"}, "0.001"}, kWarmupNumSteps,
        kWarmupType, kLastIteration}},
      {"WarmupCosineLR",
       "ds_warmup_cosine",
       "DeepSpeed's WarmupCosineLR as its engine steps it: the first step at 0, warm-up from warmup_min_ratio "
       "to 1 of learning_rate, then a cosine to cos_min_ratio",
       {kTotalNumSteps,
        {"warmup_min_ratio", Value::rate, {"warmup_min_ratio"}, "0"},
        kWarmupNumSteps,
        {"cos_min_ratio", Value::rate, {"cos_min_ratio"}, "0.0001"},
        kWarmupType,
        kLastIteration}},
  };
  return types;
}

bool is_auto(const Json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

std::string text_of(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

class SchedulerReader {
 public:
  explicit SchedulerReader(DeepSpeedConfig& ds) : ds_(ds) {}

  void read(const Json& block) {
    if (!block.is_object()) wrong_type("scheduler", "an object", block);
    const SchedulerType& type = type_of(block);
    for (auto it = block.begin(); it != block.end(); ++it) {
      if (it.key() != "type" && it.key() != "params") {
        unsupported("scheduler." + it.key(), "shardft does not implement it; it reads scheduler keys type, params");
      }
    }
    ds_.settings.push_back({"lr_scheduler_type", type.schedule, where("scheduler.type")});
    ds_.entries.push_back({"scheduler.type", type.name, {"lr_scheduler_type"}, type.note});

    const Json params = block.contains("params") ? block["params"] : Json::object();
    if (!params.is_object()) wrong_type("scheduler.params", "an object", params);
    for (auto it = params.begin(); it != params.end(); ++it) {
      const Param* p = find(type, it.key());
      if (p == nullptr) {
        std::string names;
        for (const Param& q : type.params) names += (names.empty() ? "" : ", ") + std::string(q.name);
        unsupported("scheduler.params." + it.key(),
                    "DeepSpeed's " + std::string(type.name) + " takes no such parameter; it takes " + names);
      }
      param(*p, it.value());
    }
    for (const Param& p : type.params) {
      if (params.contains(p.name)) continue;
      const std::string key = std::string("scheduler.params.") + p.name;
      if (p.value == Value::step_count) {
        unsupported(key, "DeepSpeed's " + std::string(type.name) +
                             " requires it (a TypeError without it); write \"auto\" for the run's steps");
      }
      if (*p.absent == '\0') continue;
      ds_.settings.push_back({p.recipe.front(), p.absent, where(key) + " (not in the file: DeepSpeed's default)"});
      ds_.entries.push_back({key, p.absent, {p.recipe.front()}, "not in the file: DeepSpeed's default"});
    }
  }

 private:
  std::string where(const std::string& key) const { return ds_.path + ": " + key; }

  [[noreturn]] void unsupported(const std::string& key, const std::string& why) const {
    throw ConfigError(ds_.path + ": DeepSpeed key '" + key + "' is not supported by shardft: " + why);
  }
  [[noreturn]] void wrong_type(const std::string& key, const std::string& expected, const Json& v) const {
    throw ConfigError(ds_.path + ": DeepSpeed key '" + key + "' expects " + expected + ", got " + v.dump());
  }

  const SchedulerType& type_of(const Json& block) const {
    if (!block.contains("type") || !block["type"].is_string()) {
      unsupported("scheduler.type", "missing or not a string; shardft implements WarmupLR, WarmupDecayLR and "
                                    "WarmupCosineLR");
    }
    const std::string name = block["type"].get<std::string>();
    for (const SchedulerType& t : scheduler_types()) {
      if (name == t.name) return t;
    }
    unsupported("scheduler.type", "'" + name +
                                      "' is not implemented; shardft implements DeepSpeed's WarmupLR, WarmupDecayLR "
                                      "and WarmupCosineLR, and HF's schedules through the recipe's "
                                      "lr_scheduler_type (remove the \"scheduler\" block for those)");
  }

  static const Param* find(const SchedulerType& type, const std::string& name) {
    for (const Param& p : type.params) {
      if (name == p.name) return &p;
    }
    return nullptr;
  }

  void param(const Param& p, const Json& v) {
    const std::string key = std::string("scheduler.params.") + p.name;
    if (p.value == Value::last_iteration) {
      if (!is_auto(v) && !(v.is_number_integer() && v.get<long>() == -1)) {
        unsupported(key, "only -1 (a fresh schedule) is; shardft's schedule follows the optimizer step, and a "
                         "resumed run continues it from its checkpoint");
      }
      ds_.entries.push_back({key, text_of(v), {}, "as shardft: the schedule starts with the run"});
      return;
    }
    if (is_auto(v)) {
      // HF's Trainer fills these two from what it computes for the run; the recipe keys hold the inputs.
      const char* how = p.value == Value::positive_int ? "warmup_steps, or warmup_ratio of the run's steps (HF: ceil)"
                        : p.value == Value::step_count ? "the run's optimizer steps"
                                                       : "";
      ds_.entries.push_back({key, "auto", p.recipe, how});
      return;
    }
    switch (p.value) {
      case Value::rate:
        if (!v.is_number()) wrong_type(key, "a number or \"auto\" (shardft has one parameter group)", v);
        break;
      case Value::positive_int:
        if (!v.is_number_integer() || v.get<long>() <= 0) {
          unsupported(key, "DeepSpeed requires a positive whole number (it raises ValueError for " + v.dump() +
                               "); write \"auto\" for the recipe's warmup_steps or warmup_ratio");
        }
        break;
      case Value::step_count:
        if (!v.is_number_integer() || v.get<long>() < 1) wrong_type(key, "a whole number >= 1 or \"auto\"", v);
        break;
      case Value::warmup_type:
        if (v != "log" && v != "linear") {
          unsupported(key, v.dump() + " is neither \"log\" nor \"linear\" (DeepSpeed would warn and warm up "
                                      "logarithmically)");
        }
        break;
      case Value::last_iteration:
        break;
    }
    const std::string note =
        p.value == Value::step_count ? "the run's length: HF's Trainer requires them to be equal" : "";
    ds_.settings.push_back({p.recipe.front(), text_of(v), where(key)});
    ds_.entries.push_back({key, text_of(v), {p.recipe.front()}, note});
  }

  DeepSpeedConfig& ds_;
};

}  // namespace

void read_deepspeed_scheduler(const nlohmann::ordered_json& block, DeepSpeedConfig& ds) {
  SchedulerReader(ds).read(block);
}

}  // namespace shardft
