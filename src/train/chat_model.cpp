#include "train/chat_model.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "config/hf_model_config.hpp"
#include "config/recipe_schema.hpp"
#include "data/sft_data.hpp"
#include "tokenizer/tokenizer.hpp"
#include "kernels/elementwise.hpp"
#include "train/attention_choice.hpp"
#include "train/checkpoint_read.hpp"
#include "train/hf_export.hpp"
#include "io/lora_adapter_config.hpp"
#include "train/adapter_merge.hpp"
#include "train/pretrained.hpp"
#include "train/qlora_base.hpp"
#include "train/trainer.hpp"

namespace shardft {

namespace fs = std::filesystem;

namespace {

bool is_set(const TrainConfig& cfg, const std::string& key) {
  return std::any_of(cfg.sources.begin(), cfg.sources.end(), [&](const auto& s) { return s.first == key; });
}

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

// The keys a run's recipe knows better than the defaults of a recipe that does not set them.
const char* const kRunKeys[] = {"tokenizer_name_or_path", "chat_template", "max_seq_length", "bf16",
                                "dataset_text_field"};

void apply_run_recipe(TrainConfig& cfg, const nlohmann::json& meta, const std::string& meta_path, bool skip_tokenizer) {
  if (!meta.contains("config") || !meta["config"].is_string()) return;
  YAML::Node saved;
  try {
    saved = YAML::Load(meta["config"].get<std::string>());
  } catch (const YAML::Exception& e) {
    throw FormatError(meta_path + ": \"config\" is not a readable recipe: " + e.what());
  }
  if (!saved.IsMap()) return;
  for (const char* name : kRunKeys) {
    if (is_set(cfg, name) || (skip_tokenizer && std::string(name) == "tokenizer_name_or_path")) continue;
    const YAML::Node v = saved[name];
    if (!v || !v.IsScalar()) continue;
    const std::string where = meta_path + " (the run's recipe)";
    set_value_from_text(cfg, *find_recipe_key(name), v.Scalar(), where);
    cfg.sources.emplace_back(name, where);
  }
}

}  // namespace

ChatModel open_chat_model(const std::string& dir_in, const std::string& what, TrainConfig cfg, std::ostream& log) {
  std::error_code ec;
  if (dir_in.empty()) throw ConfigError(what + ": no model directory given");
  if (!fs::is_directory(dir_in, ec)) {
    throw ConfigError(what + ": '" + dir_in +
                      "' is not a directory (expected a training output_dir, an HF model directory or a checkpoint-N "
                      "directory)");
  }
  std::string dir = dir_in;
  const fs::path d(dir);
  const bool hf = path_exists(d / "config.json") &&
                  (path_exists(d / "model.safetensors") || path_exists(d / "model.safetensors.index.json"));
  bool checkpoint = !hf && path_exists(d / "metadata.json");
  // The checkpoint whose metadata holds the run's recipe: the directory itself, or an output_dir's latest.
  std::string run_checkpoint = path_exists(d / "metadata.json") ? dir : "";
  if (run_checkpoint.empty() && path_exists(d / "latest")) {
    std::ifstream in(d / "latest");
    std::string name;
    std::getline(in, name);
    name = trim(name);
    if (!name.empty() && path_exists(d / name / "metadata.json")) run_checkpoint = (d / name).string();
  }
  if (!hf && !checkpoint) {
    if (run_checkpoint.empty()) {
      throw ConfigError(
          what + ": '" + dir +
          "' holds no model: expected config.json with model.safetensors (or model.safetensors.index.json), "
          "or a checkpoint's metadata.json");
    }
    log << what << ": '" << dir << "' has no model.safetensors; using its latest checkpoint " << run_checkpoint
        << std::endl;
    dir = run_checkpoint;
    checkpoint = true;
  }

  const bool tokenizer_explicit = is_set(cfg, "tokenizer_name_or_path");
  const bool dir_has_tokenizer = path_exists(fs::path(dir) / "tokenizer.json");
  nlohmann::json run_meta;
  if (!run_checkpoint.empty()) {
    run_meta = read_checkpoint_metadata(run_checkpoint);
    apply_run_recipe(cfg, run_meta, run_checkpoint + "/metadata.json", dir_has_tokenizer);
  }
  if (!tokenizer_explicit && dir_has_tokenizer) cfg.tokenizer_name_or_path = dir;
  // A LoRA run's checkpoint holds its adapter, not the base: the model is the adapter's base with the
  // adapter merged (--adapter names another adapter over any model).
  std::string adapter = cfg.adapter_path;
  std::optional<QloraBase> qlora;  // a QLoRA checkpoint: its base as the run's model read it
  if (checkpoint && path_exists(fs::path(dir) / "adapter_config.json")) {
    verify_checkpoint_for_reading(dir, log);
    if (!adapter.empty()) {
      throw ConfigError(what + ": '" + dir + "' is a LoRA checkpoint with its own adapter; --adapter names another one");
    }
    adapter = dir;
    const std::string base = read_adapter_config_json(dir + "/adapter_config.json").base_model_name_or_path;
    if (base.empty() || !fs::is_directory(base, ec)) {
      throw ConfigError(dir + "/adapter_config.json: base_model_name_or_path '" + base +
                        "' is not a directory holding the base model this LoRA checkpoint was trained on");
    }
    log << what << ": '" << dir << "' is a LoRA checkpoint; its base is " << base << std::endl;
    qlora = read_qlora_base(read_checkpoint_metadata(dir), dir + "/metadata.json");
    dir = base;
    checkpoint = false;
  }

  ChatModel cm;
  int sliding_window = 0;
  nlohmann::json meta;
  if (checkpoint) {
    meta = verify_checkpoint_for_reading(dir, log);  // the weights are read only from a checkpoint that verifies
    cfg.model = model_config_from_meta(meta.at("model"));
    cm.source = "checkpoint " + dir + " (step " + meta.value("step", nlohmann::json(0)).dump() + ")";
  } else {
    const HfModelConfig hfc = read_hf_model_config(dir);
    cfg.model = hfc.model;
    sliding_window = hfc.sliding_window;
    cm.source = dir + " (" + hfc.model_type + ")";
  }
  cm.context_limit = cfg.model.max_position_embeddings;
  cm.limit_reason = "max_position_embeddings";
  if (sliding_window > 0 && sliding_window < cm.context_limit) {
    cm.context_limit = sliding_window;
    cm.limit_reason = "sliding_window";
  }
  if (is_set(cfg, "max_seq_length") && cfg.max_seq_length < cm.context_limit) {
    cm.context_limit = cfg.max_seq_length;
    cm.limit_reason = "max_seq_length";
  }

  cm.tokenizer = load_tokenizer(cfg.tokenizer_name_or_path);
  if (cfg.model.vocab_size < cm.tokenizer->vocab_size()) {
    throw ConfigError("the model's vocab_size " + std::to_string(cfg.model.vocab_size) + " (" + cm.source +
                      ") is smaller than the tokenizer's " + std::to_string(cm.tokenizer->vocab_size()) + " (" +
                      cm.tokenizer->fingerprint() + "); set tokenizer_name_or_path to the model's tokenizer");
  }
  cm.encoder = std::make_unique<ChatEncoder>(
      *cm.tokenizer, resolve_chat_template(cfg.chat_template, cfg.tokenizer_name_or_path, *cm.tokenizer));

  cm.model = std::make_unique<Decoder>(cfg.model, compute_dtype(cfg));
  cm.model->set_logits_chunk_tokens(cfg.logits_chunk_tokens);
  configure_attention(*cm.model, cfg.attn_implementation);
  const ParamLayout& layout = cm.model->layout();
  cm.params = std::make_unique<LocalParams>(layout);
  auto host = Kokkos::create_mirror_view(cm.params->weights());
  if (checkpoint) {
    check_checkpoint_layout(meta, layout, dir + "/metadata.json");
    read_checkpoint_master(dir, meta, 0, layout.total_numel(), host.data());
  } else {
    read_pretrained_weights(layout, dir, host.data());
    if (qlora) {
      HfModelWeights base(dir);
      for (std::size_t p = 0; p < layout.params().size(); ++p) {
        const ParamSpec& spec = layout.params()[p];
        to_qlora_base_values(*qlora, base, spec.name, spec.shape, host.data() + layout.offset(static_cast<int>(p)));
      }
      log << what << ": QLoRA checkpoint: its base's " << qlora->nf4_params.size()
          << " NF4 matrices as the run read them" << std::endl;
    }
  }
  if (!adapter.empty()) {
    merge_adapter_into_weights(adapter, layout, host.data(), log);
    cm.source += " + adapter " + adapter;
  }
  Kokkos::deep_copy(cm.params->weights(), host);
  round_to_compute_dtype(cfg, cm.params->weights());
  log << "model " << cm.source << ": " << layout.total_numel() << " parameters, " << (cfg.bf16 ? "bf16" : cfg.fp16 ? "fp16" : "fp32")
      << "; tokenizer " << cm.tokenizer->fingerprint() << ", " << cm.encoder->describe() << "; context limit "
      << cm.context_limit << " tokens (" << cm.limit_reason << ")" << std::endl;
  cm.cfg = std::move(cfg);
  return cm;
}

ChatPrompt make_chat_prompt(const ChatEncoder& encoder, Conversation conv, const std::string& system) {
  ChatPrompt p;
  if (conv.empty()) throw DataError("empty conversation");
  constexpr int kNoLimit = 1 << 30;
  if (is_text_sample(conv)) {  // continue the text: everything but the end-of-text the template closes it with
    std::vector<ChatSegment> segments = render_chat(encoder.chat_template(), conv, false);
    if (!segments.empty() && segments.back().special) segments.pop_back();
    p.ids = encoder.encode_segments(segments, kNoLimit).input_ids;
    p.turns = std::move(conv);
    return p;
  }
  if (conv.back().role == "assistant") {
    p.reference = encoder.reference_text(conv);
    p.has_reference = true;
    conv.pop_back();
  }
  if (!system.empty() && (conv.empty() || conv.front().role != "system")) conv.insert(conv.begin(), {"system", system});
  p.ids = encoder.encode_segments(render_chat(encoder.chat_template(), conv, true), kNoLimit).input_ids;
  p.turns = std::move(conv);
  return p;
}

ChatPrompt fit_chat_prompt(const ChatEncoder& encoder, Conversation& history, const std::string& system,
                           int context_limit, int room) {
  for (;;) {
    ChatPrompt p = make_chat_prompt(encoder, history, system);
    if (static_cast<int>(p.ids.size()) + room <= context_limit) return p;
    const std::size_t first = !history.empty() && history.front().role == "system" ? 1 : 0;
    if (history.size() <= first + 1) {
      throw DataError("the message is " + std::to_string(p.ids.size()) +
                      " tokens with the template; the context limit is " + std::to_string(context_limit) +
                      " and the answer needs room too");
    }
    history.erase(history.begin() + static_cast<std::ptrdiff_t>(first));
  }
}

}  // namespace shardft
