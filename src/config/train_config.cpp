// Loading a recipe: defaults, then the YAML file, then --key=value overrides, then validation.
// Every per-key decision comes from the table in recipe_schema.cpp; this file only knows
// where values come from and the checks that involve more than one key.
#include "config/train_config.hpp"

#include "config/deepspeed_json.hpp"
#include "config/hf_keys_elsewhere.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <stdexcept>

#include "config/hf_model_config.hpp"
#include "config/lr_scheduler_kwargs.hpp"
#include "config/recipe_schema.hpp"

namespace shardft {
namespace {

// ---- where each key was set ---------------------------------------------------------------

// The last setter wins, so each key has at most one entry.
void record_source(TrainConfig& cfg, const std::string& key, const std::string& where) {
  for (auto& entry : cfg.sources) {
    if (entry.first == key) {
      entry.second = where;
      return;
    }
  }
  cfg.sources.emplace_back(key, where);
}

}  // namespace

std::string source_of(const TrainConfig& cfg, const std::string& key) {
  for (const auto& entry : cfg.sources) {
    if (entry.first == key) return entry.second;
  }
  return "";
}

namespace {

std::string unknown_key_message(const std::string& where, const std::string& name, const std::string& context) {
  const std::string elsewhere = hf_key_elsewhere(name);
  if (!elsewhere.empty()) return where + ": key '" + name + "'" + context + " is not supported by shardft: " + elsewhere;
  std::string message = where + ": unknown key '" + name + "'" + context;
  const std::string suggestion = closest_recipe_key(name);
  if (!suggestion.empty()) message += " (did you mean '" + suggestion + "'?)";
  return message;
}

// ---- the YAML recipe ----------------------------------------------------------------------

const char* node_kind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null: return "nothing";
    default: return "a scalar";
  }
}

class RecipeFileReader {
 public:
  RecipeFileReader(TrainConfig& cfg, std::string path) : cfg_(cfg), path_(std::move(path)) {}

  void read(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      throw ConfigError(path_ + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    }
    // An empty file is more likely a failed copy or a wrong path than a wish for every default.
    if (root.IsNull()) {
      throw ConfigError(path_ + ": the recipe has no keys (an empty file, or only comments); to train with every "
                        "default, leave out --config");
    }
    if (!root.IsMap()) {
      throw ConfigError(location(root) + ": a recipe is a mapping of 'key: value' lines, got " + node_kind(root));
    }
    for (const auto& entry : root) apply_entry(entry.first, entry.second, /*under_model=*/false);
  }

 private:
  std::string location(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    return mark.is_null() ? path_ : path_ + ":" + std::to_string(mark.line + 1);
  }

  void apply_entry(const YAML::Node& key_node, const YAML::Node& value, bool under_model) {
    const std::string where = location(key_node);
    if (!key_node.IsScalar()) throw ConfigError(where + ": keys must be plain names, got " + node_kind(key_node));
    const std::string name = key_node.Scalar();

    if (name == "model" && !under_model) {
      if (value.IsNull()) return;
      if (!value.IsMap()) {
        throw ConfigError(where + ": key 'model' expects a mapping of model keys (hidden_size: ...), got " +
                          node_kind(value));
      }
      for (const auto& entry : value) apply_entry(entry.first, entry.second, /*under_model=*/true);
      return;
    }

    const RecipeKey* key = find_recipe_key(name);
    if (key == nullptr) throw ConfigError(unknown_key_message(where, name, under_model ? " under 'model'" : ""));
    if (under_model && !key->is_model_key) {
      throw ConfigError(where + ": key '" + name + "' is not a model key; write it at the top level");
    }
    // yaml-cpp keeps both entries of a repeated key; silently taking the last hides mistakes.
    const auto seen = first_seen_.find(key->name);
    if (seen != first_seen_.end()) {
      throw ConfigError(where + ": key '" + key->name + "' is set twice (first at " + seen->second + ")");
    }
    first_seen_.emplace(key->name, where);

    if (value.IsNull() && is_string_key(*key)) {
      set_value_from_text(cfg_, *key, "", where);  // `eval_dataset_path:` means none
    } else if (value.IsScalar()) {
      set_value_from_text(cfg_, *key, value.Scalar(), where);
    } else if (key->normalize) {
      // A list or mapping (`datasets`, `role_map`): hand its flow text to the key's own parser.
      YAML::Emitter flow;
      flow << YAML::Flow << value;
      set_value_from_text(cfg_, *key, flow.c_str(), where);
    } else {
      throw ConfigError(where + ": key '" + key->name + "' expects " + expected_value_text(*key) + ", got " +
                        node_kind(value));
    }
    record_source(cfg_, key->name, where);
  }

  TrainConfig& cfg_;
  std::string path_;
  std::map<std::string, std::string> first_seen_;
};

// ---- command-line overrides ---------------------------------------------------------------

bool is_flag(const std::string& arg) { return arg.size() > 2 && arg.compare(0, 2, "--") == 0; }

// "--learning-rate" and "--model.hidden_size" name the same keys as their recipe spellings; "--adapter"
// is adapter_path (the flag `shardft generate` shares).
const RecipeKey* find_override_key(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  if (name == "adapter") name = "adapter_path";
  if (const RecipeKey* key = find_recipe_key(name)) return key;
  const std::string model_prefix = "model.";
  if (name.compare(0, model_prefix.size(), model_prefix) == 0) {
    const RecipeKey* key = find_recipe_key(name.substr(model_prefix.size()));
    if (key != nullptr && key->is_model_key) return key;
  }
  return nullptr;
}

void apply_overrides(TrainConfig& cfg, const std::vector<std::string>& overrides) {
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    const std::string& arg = overrides[i];
    if (!is_flag(arg)) {
      throw ConfigError("unexpected argument '" + arg + "': overrides are --key=value or --key value");
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const std::string where = "--" + name;
    const RecipeKey* key = find_override_key(name);
    if (key == nullptr) throw ConfigError(unknown_key_message(where, name, ""));

    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < overrides.size() && !is_flag(overrides[i + 1])) {
      value = overrides[++i];
    } else if (is_bool_key(*key)) {
      value = "true";  // a bare boolean flag: `--bf16`
    } else {
      throw ConfigError(where + ": key '" + key->name + "' needs a value (" + expected_value_text(*key) + ")");
    }
    set_value_from_text(cfg, *key, value, where);
    record_source(cfg, key->name, where);
  }
}

// ---- validation ---------------------------------------------------------------------------

const RecipeKey& key_named(const char* name) {
  const RecipeKey* key = find_recipe_key(name);
  if (key == nullptr) throw std::logic_error(std::string("recipe schema has no key ") + name);
  return *key;
}

std::string location_prefix(const TrainConfig& cfg, const std::string& key) {
  const std::string where = source_of(cfg, key);
  return where.empty() ? "" : where + ": ";
}

// A check that involves several keys: the message starts at the first of them that a recipe
// or flag set, and ends with every key's value and origin, so the user sees what to change.
[[noreturn]] void fail_combination(const TrainConfig& cfg, std::initializer_list<const char*> keys,
                                   const std::string& problem) {
  std::string prefix;
  std::string values;
  for (const char* name : keys) {
    const std::string where = source_of(cfg, name);
    if (prefix.empty() && !where.empty()) prefix = where + ": ";
    values += std::string(values.empty() ? "" : ", ") + name + " = " + value_text(cfg, key_named(name)) + " (" +
              (where.empty() ? "default" : where) + ")";
  }
  throw ConfigError(prefix + problem + "; have " + values);
}

void validate_each_key(const TrainConfig& cfg) {
  for (const RecipeKey& key : recipe_keys()) {
    const std::string got = value_text(cfg, key);
    const std::string prefix = location_prefix(cfg, key.name) + "key '" + key.name + "' ";
    if (is_string_key(key)) {
      if (key.must_be_non_empty && got.empty()) throw ConfigError(prefix + "must not be empty");
      if (key.normalize) {
        try {
          key.normalize(got);
        } catch (const std::invalid_argument& e) {
          throw ConfigError(prefix + e.what());
        }
      }
      if (!key.choices.empty() && std::find(key.choices.begin(), key.choices.end(), got) == key.choices.end()) {
        std::string allowed;
        for (const std::string& c : key.choices) allowed += (allowed.empty() ? "" : ", ") + c;
        throw ConfigError(prefix + "must be one of " + allowed + ", got '" + got + "'");
      }
      continue;
    }
    if (is_bool_key(key)) continue;
    const double value = numeric_value(cfg, key);
    if (!std::isfinite(value)) throw ConfigError(prefix + "must be a finite number, got " + got);
    if (!key.range.is_unbounded() && !key.range.contains(value)) {
      throw ConfigError(prefix + "must be " + key.range.describe() + ", got " + got);
    }
  }
}

// QLoRA's keys against LoRA, the stage and the compute dtype (after zero_stage is settled).
void check_qlora_keys(const TrainConfig& cfg) {
  if (!cfg.load_in_4bit) return;
  if (!cfg.use_peft && cfg.peft_type != "lora" && cfg.adapter_path.empty()) {  // an adapter means LoRA
    fail_combination(cfg, {"load_in_4bit", "use_peft"},
                     "load_in_4bit (QLoRA) needs use_peft: true (or an adapter_path): a frozen base");
  }
  if (!cfg.bnb_4bit_use_double_quant) {
    fail_combination(cfg, {"bnb_4bit_use_double_quant"},
                     "load_in_4bit supports only bnb_4bit_use_double_quant: true (nested absmax, as QLoRA uses)");
  }
  const std::string& c = cfg.bnb_4bit_compute_dtype;
  const bool wants_bf16 = c == "bfloat16" || c == "bf16";
  if (!c.empty() && (wants_bf16 != cfg.bf16 || cfg.fp16)) {
    fail_combination(cfg, {"bnb_4bit_compute_dtype", "bf16", "fp16"},
                     "bnb_4bit_compute_dtype must be the run's compute dtype (bfloat16 with bf16: true, float32 "
                     "without bf16 or fp16)");
  }
}

// Evaluation during training, the best checkpoint and early stopping: HF's TrainingArguments rules.
void check_eval_keys(const TrainConfig& cfg) {
  const bool evaluates = cfg.eval_strategy != "no";
  const bool explicit_eval_file = !source_of(cfg, "eval_dataset_path").empty();
  if (cfg.val_set_size >= 1 && cfg.val_set_size != std::floor(cfg.val_set_size)) {
    fail_combination(cfg, {"val_set_size"}, "val_set_size is a fraction below 1 or a whole number of samples");
  }
  if (cfg.val_set_size > 0 && explicit_eval_file && !cfg.eval_dataset_path.empty()) {
    fail_combination(cfg, {"val_set_size", "eval_dataset_path"},
                     "val_set_size and eval_dataset_path both give the eval set; give one");
  }
  if (evaluates_during_training(cfg) && cfg.val_set_size == 0 && cfg.eval_dataset_path.empty()) {
    fail_combination(cfg, {"eval_strategy", "eval_on_start", "eval_dataset_path", "val_set_size"},
                     "evaluation needs an eval set: eval_dataset_path, or val_set_size to hold out training samples");
  }
  if (cfg.eval_generate && cfg.val_set_size > 0) {
    fail_combination(cfg, {"eval_generate", "val_set_size"},
                     "eval_generate needs conversations to prompt with (eval_dataset_path); the val_set_size split "
                     "holds tokenized samples, which evaluate the loss");
  }
  const bool judges_best = judges_best_model(cfg);
  if (judges_best && !evaluates) {
    fail_combination(cfg, {"eval_strategy", "load_best_model_at_end", "save_strategy", "early_stopping_patience"},
                     "load_best_model_at_end, save_strategy best and early_stopping_patience judge evaluations made "
                     "during training: set eval_strategy to steps or epoch");
  }
  if (judges_best && best_model_metric(cfg) == "exact_match" && !cfg.eval_generate) {
    fail_combination(cfg, {"metric_for_best_model", "eval_generate"},
                     "metric_for_best_model exact_match needs eval_generate: true (evaluations during training "
                     "are loss-only otherwise)");
  }
  if (cfg.load_best_model_at_end && cfg.save_strategy != "best") {
    if (cfg.save_strategy != cfg.eval_strategy) {
      fail_combination(cfg, {"load_best_model_at_end", "save_strategy", "eval_strategy"},
                       "load_best_model_at_end needs a checkpoint at every evaluation: save_strategy must be "
                       "eval_strategy's (or best), as in HF");
    }
    if (cfg.save_strategy == "steps" && (cfg.save_steps == 0 || cfg.save_steps % eval_interval_steps(cfg) != 0)) {
      fail_combination(cfg, {"load_best_model_at_end", "save_steps", "eval_steps", "logging_steps"},
                       "load_best_model_at_end needs a checkpoint at every evaluation: save_steps must be a round "
                       "multiple of eval_steps (" + std::to_string(eval_interval_steps(cfg)) + "), as in HF");
    }
  }
}

// The model's shape and the run's name.
void check_model_keys(const TrainConfig& cfg) {
  const ModelConfig& m = cfg.model;
  const std::string& run = cfg.run_name;
  if (run.find_first_of("/\\") != std::string::npos || run == "." || run == "..") {
    fail_combination(cfg, {"run_name"}, "run_name '" + run + "' names a folder under output_dir/runs: it must be a "
                                        "plain name, without / or \\");
  }
  if (m.explicit_head_dim == 0 && m.hidden_size % m.num_attention_heads != 0) {
    fail_combination(cfg, {"hidden_size", "num_attention_heads"},
                     "hidden_size must be divisible by num_attention_heads (or head_dim given)");
  }
  if (m.head_dim() % 2 != 0) {
    if (m.explicit_head_dim > 0) {
      fail_combination(cfg, {"head_dim"}, "head_dim = " + std::to_string(m.head_dim()) +
                                              " must be even (RoPE rotates pairs of dimensions)");
    }
    fail_combination(cfg, {"hidden_size", "num_attention_heads"},
                     "head_dim = hidden_size / num_attention_heads = " + std::to_string(m.head_dim()) +
                         " must be even (RoPE rotates pairs of dimensions)");
  }
  if (m.num_attention_heads % m.num_key_value_heads != 0) {
    fail_combination(cfg, {"num_attention_heads", "num_key_value_heads"},
                     "num_attention_heads must be divisible by num_key_value_heads (grouped-query attention)");
  }
  if (m.o_bias && !m.qkv_bias) {
    fail_combination(cfg, {"o_bias", "qkv_bias"},
                     "o_bias needs qkv_bias (HF's Llama attention_bias puts biases on q, k, v and o; Qwen2 on q, "
                     "k, v; no HF model has an o_proj bias alone)");
  }
  if (cfg.max_seq_length > m.max_position_embeddings) {
    fail_combination(cfg, {"max_seq_length", "max_position_embeddings"},
                     "max_seq_length must not exceed max_position_embeddings");
  }
}

// The learning-rate schedule's keys, each only with the schedule that reads it.
void check_schedule_keys(const TrainConfig& cfg) {
  const LrSchedulerKwargs kwargs = parse_lr_scheduler_kwargs_text(cfg.lr_scheduler_kwargs);  // canonical already
  const std::string kwargs_problem = lr_scheduler_kwargs_problem(cfg.lr_scheduler_type, kwargs);
  if (!kwargs_problem.empty()) fail_combination(cfg, {"lr_scheduler_kwargs", "lr_scheduler_type"}, kwargs_problem);
  if ((kwargs.min_lr && cfg.min_lr > 0) || (kwargs.min_lr_rate && cfg.min_lr_rate > 0)) {
    fail_combination(cfg, {"lr_scheduler_kwargs", "min_lr", "min_lr_rate"},
                     "the floor of cosine_with_min_lr is given twice, as a key and in lr_scheduler_kwargs; give one");
  }
  const double min_lr = kwargs.min_lr ? *kwargs.min_lr : cfg.min_lr;
  const bool has_min_lr = min_lr > 0;
  const bool has_min_lr_rate = cfg.min_lr_rate > 0 || (kwargs.min_lr_rate && *kwargs.min_lr_rate > 0);
  if (cfg.lr_scheduler_type == "cosine_with_min_lr") {
    if (has_min_lr == has_min_lr_rate) {
      fail_combination(cfg, {"lr_scheduler_type", "min_lr", "min_lr_rate"},
                       "lr_scheduler_type cosine_with_min_lr needs exactly one of min_lr > 0 or min_lr_rate > 0");
    }
    if (min_lr > cfg.learning_rate) {
      fail_combination(cfg, {"min_lr", "learning_rate"}, "min_lr must not exceed learning_rate");
    }
  } else if (has_min_lr || has_min_lr_rate) {
    // Ignoring them would train with a different schedule than the recipe reads.
    fail_combination(cfg, {"min_lr", "min_lr_rate", "lr_scheduler_type"},
                     "min_lr and min_lr_rate apply only to lr_scheduler_type cosine_with_min_lr");
  }

  // DeepSpeed's schedules: their own keys, as min_lr above; DeepSpeed raises on warmup_num_steps 0.
  const std::string& type = cfg.lr_scheduler_type;
  const bool ds = type.rfind("ds_", 0) == 0;
  if (ds && cfg.warmup_steps == 0 && cfg.warmup_ratio == 0) {
    fail_combination(cfg, {"lr_scheduler_type", "warmup_steps", "warmup_ratio"},
                     "DeepSpeed's schedules need a warmup (its warmup_num_steps must be positive): set warmup_steps "
                     "or warmup_ratio");
  }
  if (cfg.warmup_type != "log" && !ds) {
    fail_combination(cfg, {"warmup_type", "lr_scheduler_type"},
                     "warmup_type applies only to DeepSpeed's schedules (ds_*); HF's schedules warm up linearly");
  }
  if (cfg.warmup_min_lr > 0 && type != "ds_warmup" && type != "ds_warmup_decay") {
    fail_combination(cfg, {"warmup_min_lr", "lr_scheduler_type"},
                     "warmup_min_lr applies only to lr_scheduler_type ds_warmup and ds_warmup_decay");
  }
  if ((cfg.warmup_min_ratio != 0 || cfg.cos_min_ratio != TrainConfig{}.cos_min_ratio) && type != "ds_warmup_cosine") {
    fail_combination(cfg, {"warmup_min_ratio", "cos_min_ratio", "lr_scheduler_type"},
                     "warmup_min_ratio and cos_min_ratio apply only to lr_scheduler_type ds_warmup_cosine");
  }
}

// The compute dtype, the run's length, the data and the optimizer.
void check_training_keys(const TrainConfig& cfg) {
  if (cfg.bf16 && cfg.fp16) {
    fail_combination(cfg, {"bf16", "fp16"}, "bf16 and fp16 are both on; choose one compute dtype");
  }
  if (cfg.loss_scale == 0 && cfg.min_loss_scale > std::ldexp(1.0, cfg.initial_scale_power)) {
    fail_combination(cfg, {"min_loss_scale", "initial_scale_power"},
                     "min_loss_scale is above the initial scale 2^initial_scale_power");
  }
  if (cfg.max_steps == -1 && !(cfg.num_train_epochs > 0)) {
    fail_combination(cfg, {"num_train_epochs", "max_steps"},
                     "num_train_epochs must be > 0 when max_steps is -1 (the run would have no steps)");
  }
  if (!cfg.datasets.empty() && !source_of(cfg, "dataset_path").empty()) {
    fail_combination(cfg, {"datasets", "dataset_path"},
                     "datasets and dataset_path both name the training data; give one (datasets: a mixture of files, "
                     "each with a weight; a lone path there is a mixture of one)");
  }
  if (cfg.packing_strategy != "ffd" && cfg.packing_strategy != "bfd") {
    fail_combination(cfg, {"packing_strategy"},
                     "packing_strategy must be ffd or bfd" +
                         std::string(cfg.packing_strategy == "wrapped"
                                         ? ": trl's wrapped concatenates samples and cuts rows across them; shardft "
                                           "keeps each sample whole in one row (its positions and attention mask its own)"
                                         : ""));
  }
  // HF's optimizer names: its AdamW variants all mean shardft's AdamW; the others are not implemented.
  const std::string& optim = cfg.optim;
  if (optim != "adamw_torch" && optim != "adamw_torch_fused" && optim != "adamw_apex_fused" && optim != "adamw_hf") {
    const bool low_bit = optim.find("8bit") != std::string::npos || optim.find("4bit") != std::string::npos ||
                         optim.rfind("paged_", 0) == 0;
    fail_combination(cfg, {"optim"},
                     "optim '" + optim + "' is not implemented: shardft's optimizer is AdamW with fp32 moments (optim "
                     "adamw_torch, adamw_torch_fused, adamw_apex_fused or adamw_hf)" +
                         std::string(low_bit ? "; instead of 8-bit or paged moments, ZeRO stages 1-3 shard them "
                                               "over the ranks (zero_stage)"
                                             : ""));
  }
}

void validate_combinations(const TrainConfig& cfg) {
  check_model_keys(cfg);
  check_schedule_keys(cfg);
  check_training_keys(cfg);
  if (cfg.do_eval && cfg.eval_dataset_path.empty() && cfg.val_set_size == 0) {
    fail_combination(cfg, {"eval_dataset_path", "do_eval", "val_set_size"},
                     "do_eval needs an eval set: eval_dataset_path, or val_set_size to hold out training samples");
  }
  check_eval_keys(cfg);
}

// ---- writing YAML -------------------------------------------------------------------------

// Plain when every YAML reader reads it back as this same string, double-quoted otherwise.
std::string yaml_string(const std::string& s) {
  const bool plain_chars = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/' || c == '.' || c == '-' || c == '+';
  });
  std::string lower = s;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool looks_like_other_type = lower == "true" || lower == "false" || lower == "yes" || lower == "no" ||
                                     lower == "on" || lower == "off" || lower == "null" || lower == "y" ||
                                     lower == "n" || lower.find_first_not_of("0123456789.+-e_") == std::string::npos;
  const bool starts_plain = plain_chars && (std::isalnum(static_cast<unsigned char>(s[0])) || s[0] == '_' ||
                                            s[0] == '/' || s[0] == '.');
  if (plain_chars && starts_plain && !looks_like_other_type) return s;

  std::string quoted = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      quoted += buf;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string normalized_dtype(const std::string& d) {
  if (d == "bf16") return "bfloat16";
  if (d == "fp32") return "float32";
  if (d == "fp16") return "float16";
  return d;
}

// A bitsandbytes 4-bit save is read as the NF4 bytes it holds, never dequantized and quantized again: that
// is QLoRA's frozen base, so the recipe must be a QLoRA one. The compute dtype saved with it is only
// transformers' default for loading it (a loading BitsAndBytesConfig overrides it), so the run's dtype
// applies unless the recipe names another one than the checkpoint.
void check_bnb_4bit_checkpoint(const TrainConfig& cfg, const HfModelConfig& hf) {
  const std::string config = cfg.model_name_or_path + "/config.json";
  const bool peft = cfg.use_peft || cfg.peft_type == "lora" || !cfg.adapter_path.empty();
  if (!cfg.load_in_4bit || !peft) {
    const std::string where = source_of(cfg, cfg.load_in_4bit ? "load_in_4bit" : "use_peft");
    throw ConfigError((where.empty() ? "" : where + ": ") + "model_name_or_path '" + cfg.model_name_or_path +
                      "' is a bitsandbytes 4-bit checkpoint (" + config +
                      ": quantization_config.load_in_4bit true); its NF4 weights are a frozen QLoRA base, which "
                      "needs load_in_4bit: true and use_peft: true; have load_in_4bit = " +
                      (cfg.load_in_4bit ? "true" : "false") + ", use_peft = " + (peft ? "true" : "false"));
  }
  const std::string where = source_of(cfg, "bnb_4bit_compute_dtype");
  if (!where.empty() && !hf.bnb_4bit_compute_dtype.empty() &&
      normalized_dtype(cfg.bnb_4bit_compute_dtype) != normalized_dtype(hf.bnb_4bit_compute_dtype)) {
    throw ConfigError(where + ": bnb_4bit_compute_dtype " + cfg.bnb_4bit_compute_dtype + " contradicts " + config +
                      ": quantization_config.bnb_4bit_compute_dtype " + hf.bnb_4bit_compute_dtype +
                      " (leave the recipe's unset to compute in the run's dtype)");
  }
}

// The model's shape comes from the directory's config.json; a recipe that also sets a shape key
// would silently disagree with the weights, so that is an error naming where it was set.
void apply_pretrained_model_config(TrainConfig& cfg) {
  for (const RecipeKey& key : recipe_keys()) {
    if (!key.is_model_key) continue;
    const std::string where = source_of(cfg, key.name);
    if (!where.empty()) {
      throw ConfigError(where + ": " + key.name + " comes from model_name_or_path's config.json ('" +
                        cfg.model_name_or_path + "'); remove it");
    }
  }
  const HfModelConfig hf = read_hf_model_config(cfg.model_name_or_path);
  cfg.model = hf.model;
  if (hf.bnb_4bit) check_bnb_4bit_checkpoint(cfg, hf);
  // A model comes with its tokenizer (HF's AutoTokenizer.from_pretrained(model_name_or_path)).
  if (source_of(cfg, "tokenizer_name_or_path").empty()) cfg.tokenizer_name_or_path = cfg.model_name_or_path;
  if (hf.sliding_window > 0 && cfg.max_seq_length > hf.sliding_window) {
    throw ConfigError("max_seq_length " + std::to_string(cfg.max_seq_length) + " is longer than the sliding_window " +
                      std::to_string(hf.sliding_window) + " of '" + cfg.model_name_or_path +
                      "/config.json'; sliding-window attention is not implemented, keep max_seq_length <= it");
  }
}

}  // namespace

int stage_of_sharding_strategy(const std::string& s) {
  if (s == "FULL_SHARD" || s == "HYBRID_SHARD") return 3;
  if (s == "SHARD_GRAD_OP" || s == "_HYBRID_SHARD_ZERO2") return 2;
  if (s == "NO_SHARD") return 0;
  return -1;
}

bool is_hybrid_strategy(const std::string& s) { return s == "HYBRID_SHARD" || s == "_HYBRID_SHARD_ZERO2"; }

TrainConfig load_train_config(const std::string& config_path, const std::vector<std::string>& overrides,
                              const std::string& deepspeed_path) {
  std::string recipe_text;
  if (!config_path.empty()) {
    std::ifstream in(config_path, std::ios::binary);
    if (!in) throw ConfigError("cannot open recipe '" + config_path + "': " + std::strerror(errno));
    // A directory opens fine on Linux and reads as empty, which would mean "all defaults".
    std::error_code ec;
    if (std::filesystem::is_directory(config_path, ec)) {
      throw ConfigError("cannot open recipe '" + config_path + "': Is a directory");
    }
    std::ostringstream text;
    text << in.rdbuf();
    recipe_text = text.str();
  }
  const DeepSpeedConfig ds = deepspeed_path.empty() ? DeepSpeedConfig{} : read_deepspeed_config(deepspeed_path);
  return train_config_from_text(config_path, recipe_text, ds, overrides);
}

TrainConfig train_config_from_text(const std::string& recipe_path, const std::string& recipe_text,
                                   const DeepSpeedConfig& ds, const std::vector<std::string>& overrides) {
  TrainConfig cfg;
  if (!recipe_path.empty()) RecipeFileReader(cfg, recipe_path).read(recipe_text);
  for (const KeySetting& s : ds.settings) {
    set_value_from_text(cfg, key_named(s.key.c_str()), s.value, s.where);
    record_source(cfg, s.key, s.where);
  }
  apply_overrides(cfg, overrides);
  if (!cfg.model_name_or_path.empty()) apply_pretrained_model_config(cfg);
  // Fine-tuning a checkpoint takes trl's SFTConfig default learning rate; a model trained from scratch
  // (the bundled task) keeps 3e-3. The startup report names the default that applied.
  if (!cfg.model_name_or_path.empty() && source_of(cfg, "learning_rate").empty()) {
    cfg.learning_rate = kFineTuneLearningRate;
    record_source(cfg, "learning_rate", "default for fine-tuning model_name_or_path (trl's SFTConfig)");
  }
  validate(cfg);
  // FSDP users name the stage by strategy; both given must agree.
  const int implied = stage_of_sharding_strategy(cfg.sharding_strategy);
  if (implied >= 0) {
    if (!source_of(cfg, "zero_stage").empty() && cfg.zero_stage != implied) {
      fail_combination(cfg, {"sharding_strategy", "zero_stage"},
                       "sharding_strategy " + cfg.sharding_strategy + " means zero_stage " + std::to_string(implied));
    }
    cfg.zero_stage = implied;
  }
  if ((cfg.zero_quantized_weights || cfg.zero_hpz_partition_size > 1) && cfg.zero_stage != 3) {
    fail_combination(cfg, {"zero_quantized_weights", "zero_hpz_partition_size", "zero_stage"},
                     "zero_quantized_weights and zero_hpz_partition_size > 1 need zero_stage 3");
  }
  if (cfg.zero_quantized_gradients && cfg.zero_stage < 2) {
    fail_combination(cfg, {"zero_quantized_gradients", "zero_stage"}, "zero_quantized_gradients needs zero_stage 2 or 3");
  }
  if (cfg.optimizer_overlap == "true" && cfg.zero_stage != 0) {
    fail_combination(cfg, {"optimizer_overlap", "zero_stage"}, "optimizer_overlap needs zero_stage 0");
  }
  if (cfg.optimizer_overlap_sms > 0 && cfg.optimizer_overlap == "false") {
    fail_combination(cfg, {"optimizer_overlap_sms", "optimizer_overlap"},
                     "optimizer_overlap_sms reserves SMs for an overlapped optimizer step: optimizer_overlap is false");
  }
  check_qlora_keys(cfg);
  check_deepspeed_config(ds, cfg);
  return cfg;
}

void validate(const TrainConfig& cfg) {
  validate_each_key(cfg);
  validate_combinations(cfg);
}

std::vector<std::string> ineffective_keys(const TrainConfig& cfg) {
  struct Group {
    std::vector<const char*> keys;
    bool used;
    const char* why;
  };
  const bool lora = cfg.use_peft || cfg.peft_type == "lora" || !cfg.adapter_path.empty();
  const Group groups[] = {
      {{"lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "use_rslora"},
       lora,
       "LoRA is off (use_peft: false, no peft_type lora, no adapter_path)"},
      {{"loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis", "consecutive_hysteresis",
        "min_loss_scale"},
       cfg.fp16,
       "loss scaling applies only with fp16: true"},
      {{"bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "bnb_4bit_compute_dtype"},
       cfg.load_in_4bit,
       "it applies only with load_in_4bit: true"},
      {{"eval_steps"}, cfg.eval_strategy == "steps", "it applies only with eval_strategy: steps"},
      {{"packing_strategy"}, cfg.packing, "packing is off"},
      {{"eval_generate"},
       evaluates_during_training(cfg),
       "nothing is evaluated during training (eval_strategy: no, eval_on_start: false)"},
      {{"metric_for_best_model", "greater_is_better"},
       judges_best_model(cfg),
       "no best checkpoint is judged (load_best_model_at_end, save_strategy best, early_stopping_patience are off)"},
      {{"early_stopping_threshold"}, cfg.early_stopping_patience > 0, "early_stopping_patience is 0"},
  };
  const TrainConfig defaults;
  std::vector<std::string> out;
  for (const Group& g : groups) {
    if (g.used) continue;
    for (const char* name : g.keys) {
      const RecipeKey& key = key_named(name);
      const std::string where = source_of(cfg, name), value = value_text(cfg, key);
      if (where.empty() || value == value_text(defaults, key)) continue;
      out.push_back(where + ": " + name + " = " + value + " has no effect: " + g.why);
    }
  }
  return out;
}

void resolve_bf16_auto(TrainConfig& cfg, bool supported, const std::string& why) {
  if (!cfg.bf16_auto) return;
  cfg.bf16 = supported && !cfg.fp16;
  cfg.bf16_auto = false;
  const std::string where = source_of(cfg, "bf16");
  record_source(cfg, "bf16", (where.empty() ? std::string() : where + ", ") + "auto: " +
                                 (cfg.fp16 && supported ? "fp16 is on" : why));
  validate(cfg);
}

void resolve_logits_chunk_auto(TrainConfig& cfg, int tokens, const std::string& why) {
  if (!cfg.logits_chunk_auto) return;
  cfg.logits_chunk_tokens = tokens;
  cfg.logits_chunk_auto = false;
  const std::string where = source_of(cfg, "logits_chunk_tokens");
  record_source(cfg, "logits_chunk_tokens", (where.empty() ? std::string() : where + ", ") + "auto: " + why);
  validate(cfg);
}

bool optimizer_overlaps(const TrainConfig& cfg, bool separate_queues) {
  if (cfg.optimizer_overlap != "auto") return cfg.optimizer_overlap == "true";
  return separate_queues && cfg.zero_stage == 0 && !cfg.use_peft;
}

std::uint64_t data_order_seed(const TrainConfig& cfg) {
  return cfg.data_seed >= 0 ? static_cast<std::uint64_t>(cfg.data_seed) : cfg.seed;
}

bool evaluates_during_training(const TrainConfig& cfg) { return cfg.eval_strategy != "no" || cfg.eval_on_start; }

bool judges_best_model(const TrainConfig& cfg) {
  return cfg.load_best_model_at_end || cfg.save_strategy == "best" || cfg.early_stopping_patience > 0;
}

int eval_interval_steps(const TrainConfig& cfg) { return cfg.eval_steps > 0 ? cfg.eval_steps : cfg.logging_steps; }

std::string best_model_metric(const TrainConfig& cfg) {
  const std::string& m = cfg.metric_for_best_model;
  if (m.empty()) return "loss";
  return m.rfind("eval_", 0) == 0 ? m.substr(5) : m;
}

bool best_metric_greater_is_better(const TrainConfig& cfg) {
  if (!cfg.greater_is_better.empty()) return cfg.greater_is_better == "true";
  const std::string m = best_model_metric(cfg);
  return !(m.size() >= 4 && m.compare(m.size() - 4, 4, "loss") == 0);  // HF: a name ending in "loss" is lower-better
}

std::string to_yaml(const TrainConfig& cfg) {
  std::string out;
  for (const RecipeKey& key : recipe_keys()) {
    // With a model directory the shape is its config.json's; writing it too would make the recipe
    // unloadable (a shape key beside model_name_or_path is an error).
    if (key.is_model_key && !cfg.model_name_or_path.empty()) continue;
    // The same for dataset_path beside datasets, which replaces it.
    if (key.name == "dataset_path" && !cfg.datasets.empty()) continue;
    const std::string text = value_text(cfg, key);
    // Structured keys are canonical JSON, which YAML reads as the same list or mapping.
    const bool as_is = !is_string_key(key) || (key.normalize && !text.empty());
    out += key.name + ": " + (as_is ? text : yaml_string(text)) + "\n";
  }
  return out;
}

}  // namespace shardft
