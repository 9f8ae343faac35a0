#include "config/deepspeed_json.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/deepspeed_scheduler.hpp"
#include "config/recipe_schema.hpp"
#include "config/zero_buckets.hpp"

namespace shardft {
namespace {

using Json = nlohmann::ordered_json;  // keeps the file's order for messages and the report

// What a key that sets no recipe key must hold ("auto" is always accepted).
enum class Kind { scalar, boolean, number };

// A leaf key: either it sets a recipe key (honored), or it only tunes DeepSpeed's own implementation
// and the note says what shardft does instead (accepted, no effect).
struct KeySpec {
  const char* path;
  const char* recipe;  // "" when it sets no recipe key
  Kind kind;
  const char* note;
};

// Sections handled by the generic walk; fp16, optimizer and the offload blocks have their own readers
// below, scheduler its own file (deepspeed_scheduler.cpp).
const std::vector<std::string>& plain_sections() {
  static const std::vector<std::string> s = {"zero_optimization", "bf16"};
  return s;
}

const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> specs = {
      // batch, clipping, precision
      {"train_micro_batch_size_per_gpu", "per_device_train_batch_size", Kind::scalar, ""},
      {"gradient_accumulation_steps", "gradient_accumulation_steps", Kind::scalar, ""},
      {"train_batch_size", "train_batch_size", Kind::scalar,
       "must equal micro-batch x accumulation x ranks (checked at start)"},
      {"gradient_clipping", "max_grad_norm", Kind::scalar, ""},
      {"bf16.enabled", "bf16", Kind::scalar, ""},
      {"communication_data_type", "communication_data_type", Kind::scalar, ""},
      // logging and optimizer bookkeeping
      {"steps_per_print", "", Kind::number,
       "no effect: DeepSpeed's own progress line; shardft prints its trl-style line every logging_steps"},
      {"wall_clock_breakdown", "", Kind::boolean, "no effect: off"},
      {"zero_allow_untested_optimizer", "", Kind::boolean, "no effect: shardft always uses its own AdamW"},
      // ZeRO
      {"zero_optimization.stage", "zero_stage", Kind::scalar, ""},
      {"zero_optimization.zero_hpz_partition_size", "zero_hpz_partition_size", Kind::scalar, ""},
      {"zero_optimization.zero_quantized_weights", "zero_quantized_weights", Kind::scalar, ""},
      {"zero_optimization.zero_quantized_gradients", "zero_quantized_gradients", Kind::scalar, ""},
      {"zero_optimization.reduce_bucket_size", "reduce_bucket_size", Kind::scalar, ""},
      {"zero_optimization.allgather_bucket_size", "allgather_bucket_size", Kind::scalar, ""},
      {"zero_optimization.overlap_comm", "overlap_comm", Kind::scalar, ""},
      {"zero_optimization.contiguous_gradients", "", Kind::boolean,
       "no effect: shardft's gradients always live in contiguous flat buffers (one per layer block), nothing to "
       "copy"},
      {"zero_optimization.reduce_scatter", "", Kind::boolean,
       "no effect: shardft reduce-scatters gradients at stages 1-3 and all-reduces them at stage 0 (the same sums "
       "either way)"},
      {"zero_optimization.allgather_partitions", "", Kind::boolean,
       "no effect: shardft gathers updated weights with one all-gather per layer block (DeepSpeed's true)"},
      {"zero_optimization.round_robin_gradients", "", Kind::boolean,
       "no effect: it orders gradient copies to CPU offload, which shardft does not do"},
      {"zero_optimization.sub_group_size", "", Kind::number,
       "no effect: shardft's AdamW updates each rank's owned shard in place in one pass, with no fp32 staging "
       "buffers to bound"},
      {"zero_optimization.stage3_prefetch_bucket_size", "", Kind::number,
       "no effect: at stage 3 shardft prefetches the next layer block, or as many elements ahead as an explicit "
       "allgather_bucket_size"},
      {"zero_optimization.stage3_param_persistence_threshold", "", Kind::number,
       "no effect: shardft shards every parameter, small ones included (a threshold of 0); norm weights travel in "
       "their layer block's gather"},
      {"zero_optimization.stage3_max_live_parameters", "", Kind::number,
       "no effect, not checked: shardft keeps at most the current and the prefetched next layer block gathered"},
      {"zero_optimization.stage3_max_reuse_distance", "", Kind::number,
       "no effect: shardft releases a block's gathered weights when the block is done and gathers them again for "
       "backward (hpZ: from the node-local copy)"},
      {"zero_optimization.stage3_gather_16bit_weights_on_model_save", "", Kind::boolean,
       "no effect: shardft always gathers the whole model into output_dir/model.safetensors (fp32) at the end, and "
       "`shardft consolidate` exports any checkpoint"},
  };
  return specs;
}

const KeySpec* find_spec(const std::string& path) {
  for (const KeySpec& s : key_specs()) {
    if (path == s.path) return &s;
  }
  return nullptr;
}

std::string join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_auto(const Json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

// A scalar as the recipe reads it: strings as they are, numbers and booleans as JSON writes them.
std::string scalar_text(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The fp16 block: each loss-scaling key sets the recipe key of its name (enabled sets fp16).
const std::vector<KeySpec>& fp16_key_specs() {
  static const std::vector<KeySpec> specs = {
      {"fp16.enabled", "fp16", Kind::scalar, ""},
      {"fp16.loss_scale", "loss_scale", Kind::scalar, ""},
      {"fp16.initial_scale_power", "initial_scale_power", Kind::scalar, ""},
      {"fp16.loss_scale_window", "loss_scale_window", Kind::scalar, ""},
      {"fp16.hysteresis", "hysteresis", Kind::scalar, ""},
      {"fp16.consecutive_hysteresis", "consecutive_hysteresis", Kind::scalar, ""},
      {"fp16.min_loss_scale", "min_loss_scale", Kind::scalar, ""},
      {"fp16.auto_cast", "", Kind::boolean,
       "as shardft with false: the model's inputs are token ids, and its layers round to fp16 themselves"},
      {"fp16.fp16_master_weights_and_grads", "", Kind::boolean,
       "as shardft with false: master weights, gradients and AdamW state stay fp32"},
  };
  return specs;
}

// Sub-keys of offload_optimizer / offload_param besides device; inert while device is none.
const std::vector<std::string>& offload_tuning_keys() {
  static const std::vector<std::string> k = {"pin_memory",    "buffer_count",  "buffer_size", "fast_init",
                                             "ratio",         "nvme_path",     "max_in_cpu",  "pipeline",
                                             "pipeline_read", "pipeline_write"};
  return k;
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "2e-05" and "0.00002" are one learning rate.
bool same_number(const std::string& a, const std::string& b) {
  if (a == b) return true;
  try {
    return std::stod(a) == std::stod(b);
  } catch (const std::exception&) {
    return false;
  }
}

class Reader {
 public:
  explicit Reader(std::string path) { ds_.path = std::move(path); }

  DeepSpeedConfig read(const Json& root) {
    walk(root, "");
    check_agreement();
    return std::move(ds_);
  }

 private:
  std::string where(const std::string& key) const { return ds_.path + ": " + key; }

  // Two keys of the file that set one recipe key must agree (optimizer.params.lr and
  // scheduler.params.warmup_max_lr, both learning_rate): HF's Trainer rejects the pair unless both equal
  // its learning_rate, and which one DeepSpeed obeys depends on the scheduler.
  void check_agreement() const {
    const std::string prefix = ds_.path + ": ";
    for (std::size_t i = 0; i < ds_.settings.size(); ++i) {
      for (std::size_t j = i + 1; j < ds_.settings.size(); ++j) {
        const KeySetting& a = ds_.settings[i];
        const KeySetting& b = ds_.settings[j];
        if (a.key != b.key || same_number(a.value, b.value)) continue;
        throw ConfigError(prefix + "DeepSpeed keys '" + a.where.substr(prefix.size()) + "' (" + a.value + ") and '" +
                          b.where.substr(prefix.size()) + "' (" + b.value + ") both set " + a.key +
                          " and disagree; make them equal or write \"auto\" in one of them");
      }
    }
  }

  [[noreturn]] void unsupported(const std::string& key, const std::string& why) const {
    throw ConfigError(ds_.path + ": DeepSpeed key '" + key + "' is not supported by shardft: " + why);
  }
  [[noreturn]] void wrong_type(const std::string& key, const std::string& expected, const Json& v) const {
    throw ConfigError(ds_.path + ": DeepSpeed key '" + key + "' expects " + expected + ", got " + v.dump());
  }
  void require_object(const std::string& key, const Json& v) const {
    if (!v.is_object()) wrong_type(key, "an object", v);
  }

  // The keys shardft reads directly under `prefix`, for the message about an unknown one.
  std::string known_under(const std::string& prefix) const {
    std::vector<std::string> names;
    auto add = [&](const std::string& full) {
      const std::string head = prefix.empty() ? full : full.substr(prefix.size() + 1);
      const std::string first = head.substr(0, head.find('.'));
      if (!contains(names, first)) names.push_back(first);
    };
    for (const KeySpec& s : key_specs()) {
      const std::string p = s.path;
      if (prefix.empty() || p.compare(0, prefix.size() + 1, prefix + ".") == 0) add(p);
    }
    if (prefix.empty()) {
      for (const char* s : {"fp16", "optimizer", "scheduler"}) add(s);
    } else if (prefix == "zero_optimization") {
      for (const char* s : {"zero_optimization.offload_optimizer", "zero_optimization.offload_param"}) add(s);
    }
    return comma_list(names);
  }

  void walk(const Json& obj, const std::string& prefix) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string key = join(prefix, it.key());
      const Json& v = it.value();
      if (key == "fp16") {
        fp16(v);
      } else if (key == "optimizer") {
        optimizer(v);
      } else if (key == "scheduler") {
        read_deepspeed_scheduler(v, ds_);
      } else if (key == "tensorboard") {
        tensorboard(v);
      } else if (key == "zero_optimization.offload_optimizer" || key == "zero_optimization.offload_param") {
        offload(key, v);
      } else if (contains(plain_sections(), key)) {
        require_object(key, v);
        walk(v, key);
      } else if (const KeySpec* spec = find_spec(key)) {
        leaf(*spec, v);
      } else if (prefix.empty() && v.is_object() && v.contains("enabled") && v["enabled"] == false) {
        // A feature switched off changes nothing (tensorboard, flops_profiler, ... with "enabled": false).
        ds_.entries.push_back(
            {key, "{\"enabled\": false, ...}", {}, "no effect: disabled (shardft does not implement it)"});
      } else {
        unsupported(key, "shardft does not implement it; it reads " +
                             (prefix.empty() ? std::string("these keys: ") : prefix + " keys ") + known_under(prefix));
      }
    }
  }

  void leaf(const KeySpec& spec, const Json& v) {
    const std::string key = spec.path;
    if (v.is_object() || v.is_array() || v.is_null()) wrong_type(key, "a number, a boolean or \"auto\"", v);
    const std::string recipe = spec.recipe;
    if (is_auto(v)) {
      ds_.entries.push_back(
          {key, "auto", recipe.empty() ? std::vector<std::string>{} : std::vector<std::string>{recipe}, spec.note});
      return;
    }
    if (!recipe.empty()) {
      ds_.settings.push_back({recipe, scalar_text(v), where(key)});
      ds_.entries.push_back({key, scalar_text(v), {recipe}, spec.note});
      return;
    }
    if (spec.kind == Kind::boolean && !v.is_boolean()) wrong_type(key, "true, false or \"auto\"", v);
    if (spec.kind == Kind::number && !v.is_number()) wrong_type(key, "a number or \"auto\"", v);
    if (key == "wall_clock_breakdown" && v.get<bool>()) {
      unsupported(key,
                  "true asks for DeepSpeed's forward/backward/step timings, which shardft does not measure "
                  "(its log lines carry tokens_per_second per logging step); set it false");
    }
    ds_.entries.push_back({key, scalar_text(v), {}, spec.note});
  }

  void fp16(const Json& v) {
    require_object("fp16", v);
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string key = "fp16." + it.key();
      const Json& x = it.value();
      const KeySpec* spec = nullptr;
      for (const KeySpec& s : fp16_key_specs()) {
        if (key == s.path) spec = &s;
      }
      if (spec == nullptr) {
        std::vector<std::string> names;
        for (const KeySpec& s : fp16_key_specs()) names.push_back(std::string(s.path).substr(5));
        unsupported(key, "shardft does not implement it; it reads fp16 keys " + comma_list(names));
      }
      if (it.key() == "enabled" && !x.is_boolean() && !is_auto(x)) wrong_type(key, "true, false or \"auto\"", x);
      if ((it.key() == "auto_cast" || it.key() == "fp16_master_weights_and_grads") && x == true) {
        unsupported(key, it.key() == "auto_cast"
                             ? "true casts the model's floating-point inputs to fp16, and shardft's only inputs are "
                               "token ids; its layers already compute in fp16 (fp16.enabled). Set it false"
                             : "true keeps master weights and gradients in fp16; shardft keeps them and the AdamW "
                               "state in fp32 (DeepSpeed's default). Set it false");
      }
      leaf(*spec, x);
    }
  }

  // DeepSpeed's TensorBoard monitor: event files in output_path/job_name. An empty output_path keeps
  // shardft's default folder under output_dir, named by job_name.
  void tensorboard(const Json& v) {
    require_object("tensorboard", v);
    bool enabled = false;
    std::string output_path, job_name = "DeepSpeedJobName";  // DeepSpeed's defaults
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string key = "tensorboard." + it.key();
      const Json& x = it.value();
      if (it.key() == "enabled") {
        if (!x.is_boolean()) wrong_type(key, "true or false", x);
        enabled = x.get<bool>();
      } else if (it.key() == "output_path" || it.key() == "job_name") {
        if (!x.is_string()) wrong_type(key, "a string", x);
        (it.key() == "output_path" ? output_path : job_name) = x.get<std::string>();
      } else {
        unsupported(key, "shardft reads tensorboard keys enabled, output_path, job_name");
      }
    }
    if (!enabled) {
      ds_.entries.push_back({"tensorboard", "{\"enabled\": false, ...}", {}, "no effect: disabled"});
      return;
    }
    ds_.settings.push_back({"report_to", "tensorboard", where("tensorboard.enabled")});
    ds_.entries.push_back({"tensorboard.enabled", "true", {"report_to"}, "TensorBoard event files"});
    if (output_path.empty()) {
      ds_.settings.push_back({"run_name", job_name, where("tensorboard.job_name")});
      ds_.entries.push_back({"tensorboard.job_name", job_name, {"run_name"}, "the folder output_dir/runs/" + job_name});
    } else {
      const std::string dir = (std::filesystem::path(output_path) / job_name).string();
      ds_.settings.push_back({"logging_dir", dir, where("tensorboard.output_path")});
      ds_.entries.push_back({"tensorboard.output_path", output_path, {"logging_dir"}, "event files in " + dir});
    }
  }

  void offload(const std::string& section, const Json& v) {
    require_object(section, v);
    const std::string device_key = section + ".device";
    std::string device = "none";  // DeepSpeed's default
    if (v.contains("device")) {
      if (!v["device"].is_string()) wrong_type(device_key, "\"none\", \"cpu\" or \"nvme\"", v["device"]);
      device = v["device"].get<std::string>();
    }
    const std::string what = section == "zero_optimization.offload_optimizer" ? "optimizer state" : "weights";
    if (device == "cpu" || device == "nvme") {
      unsupported(device_key, "offloading " + what + " to " + device +
                                  " is not implemented; every rank keeps its shard on its own device. Use \"device\": "
                                  "\"none\" (or remove " +
                                  section +
                                  "); a higher zero_stage or more ranks make each "
                                  "shard smaller (`shardft estimate` prints the memory per rank)");
    }
    if (device != "none" && device != "auto") {
      unsupported(device_key, "device '" + device + "' is none of \"none\", \"cpu\", \"nvme\"");
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string key = section + "." + it.key();
      const Json& x = it.value();
      if (it.key() == "device") {
        ds_.entries.push_back({key,
                               scalar_text(x),
                               {},
                               "as shardft: nothing is offloaded, each rank keeps its " + what + " on its own device"});
      } else if (contains(offload_tuning_keys(), it.key())) {
        if (x.is_object() || x.is_array()) wrong_type(key, "a number, a boolean, a string or \"auto\"", x);
        ds_.entries.push_back({key, scalar_text(x), {}, "no effect: device is none, nothing is offloaded"});
      } else {
        unsupported(key, "shardft does not implement it; it reads " + section + " keys device, " +
                             comma_list(offload_tuning_keys()));
      }
    }
  }

  void optimizer(const Json& v) {
    require_object("optimizer", v);
    if (!v.contains("type") || !v["type"].is_string()) {
      unsupported("optimizer.type", "missing or not a string; shardft's optimizer is AdamW (\"type\": \"AdamW\")");
    }
    const std::string type = v["type"].get<std::string>();
    const std::string t = lower(type);  // DeepSpeed matches optimizer names without case
    if (t != "adamw" && t != "adam") {
      unsupported("optimizer.type", "'" + type +
                                        "' is not implemented; shardft's optimizer is AdamW (\"type\": \"AdamW\" "
                                        "or \"Adam\", which DeepSpeed also runs as AdamW)");
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string key = "optimizer." + it.key();
      if (it.key() == "type") {
        ds_.entries.push_back({key,
                               type,
                               {},
                               t == "adamw" ? "as shardft: AdamW with decoupled weight decay"
                                            : "as shardft: DeepSpeed's Adam decouples weight decay (AdamW) unless "
                                              "params.adam_w_mode is false"});
      } else if (it.key() == "params") {
        require_object(key, it.value());
        optimizer_params(it.value(), t == "adam");
      } else {
        unsupported(key, "shardft does not implement it; it reads optimizer keys type, params");
      }
    }
  }

  void optimizer_params(const Json& params, bool named_adam) {
    static const KeySpec lr{"optimizer.params.lr", "learning_rate", Kind::scalar, ""};
    static const KeySpec eps{"optimizer.params.eps", "adam_epsilon", Kind::scalar, ""};
    static const KeySpec wd{"optimizer.params.weight_decay", "weight_decay", Kind::scalar,
                            "decays weight matrices only, never norm weights or biases (HF Trainer's rule; "
                            "DeepSpeed's own optimizer under HF's Trainer decays every parameter)"};
    for (auto it = params.begin(); it != params.end(); ++it) {
      const std::string name = it.key();
      const std::string key = "optimizer.params." + name;
      const Json& x = it.value();
      if (name == "lr") {
        leaf(lr, x);
      } else if (name == "eps") {
        leaf(eps, x);
      } else if (name == "weight_decay") {
        leaf(wd, x);
      } else if (name == "betas") {
        betas(x);
      } else if (name == "adam_w_mode" || name == "torch_adam") {
        if (!x.is_boolean() && !is_auto(x)) wrong_type(key, "true, false or \"auto\"", x);
        if (name == "torch_adam") {
          ds_.entries.push_back(
              {key, scalar_text(x), {}, "no effect: DeepSpeed's choice of kernel; shardft runs its own AdamW"});
        } else if (x == false && named_adam) {
          // Adam with L2 regularisation: the same as AdamW only while weight_decay is 0.
          const std::string file = ds_.path;
          ds_.final_checks.push_back([file](const TrainConfig& cfg) {
            if (cfg.weight_decay > 0) {
              throw ConfigError(file +
                                ": DeepSpeed key 'optimizer.params.adam_w_mode' false (Adam with L2 "
                                "regularisation) is not supported by shardft with weight_decay " +
                                format_double(cfg.weight_decay) +
                                ": shardft implements AdamW's decoupled weight decay only; set adam_w_mode true or "
                                "weight_decay 0");
            }
          });
          ds_.entries.push_back(
              {key, "false", {}, "accepted because weight_decay is 0: Adam and AdamW then take the same step"});
        } else {
          ds_.entries.push_back({key, scalar_text(x), {}, "as shardft: decoupled weight decay"});
        }
      } else {
        unsupported(key,
                    "shardft does not implement it; it reads optimizer params lr, betas, eps, weight_decay, "
                    "adam_w_mode, torch_adam");
      }
    }
  }

  void betas(const Json& x) {
    const std::string key = "optimizer.params.betas";
    if (is_auto(x)) {
      ds_.entries.push_back({key, "auto", {"adam_beta1", "adam_beta2"}, ""});
      return;
    }
    if (!x.is_array() || x.size() != 2) wrong_type(key, "[beta1, beta2] or \"auto\"", x);
    const char* recipe[2] = {"adam_beta1", "adam_beta2"};
    for (int i = 0; i < 2; ++i) {
      const Json& b = x[static_cast<std::size_t>(i)];
      if (is_auto(b)) continue;
      if (!b.is_number()) wrong_type(key, "[beta1, beta2] or \"auto\"", x);
      ds_.settings.push_back({recipe[i], scalar_text(b), where(key + "[" + std::to_string(i) + "]")});
    }
    ds_.entries.push_back({key, x.dump(), {"adam_beta1", "adam_beta2"}, ""});
  }

  DeepSpeedConfig ds_;
};

// The recipe key's final value, with what "auto" resolves to where that is not the value itself.
std::string resolved_value(const TrainConfig& cfg, const std::string& recipe_key, int world_size) {
  const RecipeKey* key = find_recipe_key(recipe_key);
  if (key == nullptr) return "?";
  std::string text = recipe_key + " = " + value_text(cfg, *key);
  if (recipe_key == "train_batch_size" && cfg.train_batch_size == 0) {
    const long global =
        static_cast<long>(cfg.per_device_train_batch_size) * cfg.gradient_accumulation_steps * world_size;
    text = recipe_key + " = " + std::to_string(global) + " (" + std::to_string(cfg.per_device_train_batch_size) +
           " per device x " + std::to_string(cfg.gradient_accumulation_steps) + " accumulation x " +
           std::to_string(world_size) + " ranks)";
  } else if (recipe_key == "reduce_bucket_size" || recipe_key == "allgather_bucket_size") {
    const std::int64_t n =
        recipe_key == "reduce_bucket_size" ? resolved_reduce_bucket_size(cfg) : resolved_allgather_bucket_size(cfg);
    if (value_text(cfg, *key) == "auto") text += " (" + std::to_string(n) + " elements)";
  }
  return text;
}

}  // namespace

DeepSpeedConfig read_deepspeed_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot open DeepSpeed config '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_deepspeed_config(text.str(), path);
}

DeepSpeedConfig parse_deepspeed_config(const std::string& text, const std::string& path) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw ConfigError(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw ConfigError(path + ": a DeepSpeed config is a JSON object");
  return Reader(path).read(j);
}

void check_deepspeed_config(const DeepSpeedConfig& ds, const TrainConfig& cfg) {
  for (const auto& check : ds.final_checks) check(cfg);
}

std::string describe_deepspeed_config(const DeepSpeedConfig& ds, const TrainConfig& cfg, int world_size) {
  std::string out;
  int honored = 0, other = 0;
  for (const DeepSpeedEntry& e : ds.entries) {
    std::string line = "  " + e.ds_key + " = " + e.value;
    if (!e.recipe_keys.empty()) {
      ++honored;
      line += " ->";
      for (std::size_t i = 0; i < e.recipe_keys.size(); ++i) {
        const std::string& rk = e.recipe_keys[i];
        line += (i ? ", " : " ") + resolved_value(cfg, rk, world_size);
      }
      const std::string src = source_of(cfg, e.recipe_keys.front());
      if (e.value == "auto") {
        line += " (auto: " + (src.empty() ? std::string("default") : src) + ")";
      } else if (src.rfind(ds.path + ": ", 0) != 0) {
        line += " (" + src + " wins)";
      }
      if (!e.note.empty()) line += "; " + e.note;
    } else {
      ++other;
      if (!e.note.empty()) line += ": " + e.note;
    }
    out += line + "\n";
  }
  return "DeepSpeed config " + ds.path + ": " + std::to_string(honored) + " keys map to recipe keys, " +
         std::to_string(other) + " are accepted as they are or without effect\n" + out;
}

}  // namespace shardft
