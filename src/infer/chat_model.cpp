#include "infer/chat_model.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "config/hf_model_config.hpp"
#include "config/run_recipe_keys.hpp"
#include "data/sft_data.hpp"
#include "infer/adapter_merge.hpp"
#include "infer/attention_choice.hpp"
#include "infer/checkpoint_read.hpp"
#include "infer/hf_export.hpp"
#include "infer/pretrained.hpp"
#include "infer/qlora_base.hpp"
#include "io/lora_adapter_config.hpp"
#include "kernels/elementwise.hpp"
#include "tokenizer/tokenizer.hpp"

namespace shardft {

namespace fs = std::filesystem;

namespace {

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

// What open_chat_model reads, as the directory it was given resolves.
struct ModelSource {
  std::string dir;                 // where the weights are: an HF model directory or a checkpoint
  bool checkpoint = false;         // dir is a checkpoint, else an HF model directory
  std::string run_checkpoint;      // the checkpoint whose metadata holds the run's recipe; "": none
  std::string adapter;             // an adapter merged over the weights; "": none
  std::optional<QloraBase> qlora;  // a QLoRA checkpoint's base, as the run's model read it
};

// An HF model directory, a checkpoint, or an output_dir's latest checkpoint.
ModelSource locate_model(const std::string& dir_in, const std::string& what, std::ostream& log) {
  std::error_code ec;
  if (dir_in.empty()) throw ConfigError(what + ": no model directory given");
  if (!fs::is_directory(dir_in, ec)) {
    throw ConfigError(what + ": '" + dir_in +
                      "' is not a directory (expected a training output_dir, an HF model directory or a checkpoint-N "
                      "directory)");
  }
  ModelSource src;
  src.dir = dir_in;
  const fs::path d(dir_in);
  const bool hf = path_exists(d / "config.json") &&
                  (path_exists(d / "model.safetensors") || path_exists(d / "model.safetensors.index.json"));
  src.checkpoint = !hf && path_exists(d / "metadata.json");
  // The checkpoint whose metadata holds the run's recipe: the directory itself, or an output_dir's latest.
  src.run_checkpoint = path_exists(d / "metadata.json") ? dir_in : "";
  if (src.run_checkpoint.empty() && path_exists(d / "latest")) {
    std::ifstream in(d / "latest");
    std::string name;
    std::getline(in, name);
    name = trim(name);
    if (!name.empty() && path_exists(d / name / "metadata.json")) src.run_checkpoint = (d / name).string();
  }
  if (!hf && !src.checkpoint) {
    if (src.run_checkpoint.empty()) {
      throw ConfigError(
          what + ": '" + dir_in +
          "' holds no model: expected config.json with model.safetensors (or model.safetensors.index.json), "
          "or a checkpoint's metadata.json");
    }
    log << what << ": '" << dir_in << "' has no model.safetensors; using its latest checkpoint " << src.run_checkpoint
        << std::endl;
    src.dir = src.run_checkpoint;
    src.checkpoint = true;
  }
  return src;
}

// A LoRA run's checkpoint holds its adapter, not the base: the model is the adapter's base with the
// adapter merged (--adapter names another adapter over any model).
void redirect_lora_checkpoint(ModelSource& src, const std::string& what, std::ostream& log) {
  if (!src.checkpoint || !path_exists(fs::path(src.dir) / "adapter_config.json")) return;
  verify_checkpoint_for_reading(src.dir, log);
  if (!src.adapter.empty()) {
    throw ConfigError(what + ": '" + src.dir + "' is a LoRA checkpoint with its own adapter; --adapter names another one");
  }
  src.adapter = src.dir;
  const std::string base = read_adapter_config_json(src.dir + "/adapter_config.json").base_model_name_or_path;
  std::error_code ec;
  if (base.empty() || !fs::is_directory(base, ec)) {
    throw ConfigError(src.dir + "/adapter_config.json: base_model_name_or_path '" + base +
                      "' is not a directory holding the base model this LoRA checkpoint was trained on");
  }
  log << what << ": '" << src.dir << "' is a LoRA checkpoint; its base is " << base << std::endl;
  src.qlora = read_qlora_base(read_checkpoint_metadata(src.dir), src.dir + "/metadata.json");
  src.dir = base;
  src.checkpoint = false;
}

// The model's shape into cfg.model, and cm's source and context limit: max_position_embeddings, lowered
// to a sliding_window and to a max_seq_length the recipe sets. Returns a checkpoint's verified metadata.
nlohmann::json read_model_shape(const ModelSource& src, TrainConfig& cfg, ChatModel& cm, std::ostream& log) {
  int sliding_window = 0;
  nlohmann::json meta;
  if (src.checkpoint) {
    meta = verify_checkpoint_for_reading(src.dir, log);  // the weights are read only from a checkpoint that verifies
    cfg.model = model_config_from_meta(meta.at("model"));
    cm.source = "checkpoint " + src.dir + " (step " + meta.value("step", nlohmann::json(0)).dump() + ")";
  } else {
    const HfModelConfig hfc = read_hf_model_config(src.dir);
    cfg.model = hfc.model;
    sliding_window = hfc.sliding_window;
    cm.source = src.dir + " (" + hfc.model_type + ")";
  }
  cm.context_limit = cfg.model.max_position_embeddings;
  cm.limit_reason = "max_position_embeddings";
  if (sliding_window > 0 && sliding_window < cm.context_limit) {
    cm.context_limit = sliding_window;
    cm.limit_reason = "sliding_window";
  }
  if (!source_of(cfg, "max_seq_length").empty() && cfg.max_seq_length < cm.context_limit) {
    cm.context_limit = cfg.max_seq_length;
    cm.limit_reason = "max_seq_length";
  }
  return meta;
}

// The fp32 weights into `host`: a checkpoint's master, or the HF weights (a QLoRA base as the run read
// it), with the adapter merged.
void read_chat_weights(const ModelSource& src, const nlohmann::json& meta, const ParamLayout& layout, float* host,
                       const std::string& what, std::string& source, std::ostream& log) {
  if (src.checkpoint) {
    check_checkpoint_layout(meta, layout, src.dir + "/metadata.json");
    read_checkpoint_master(src.dir, meta, 0, layout.total_numel(), host);
  } else {
    read_pretrained_weights(layout, src.dir, host);
    if (src.qlora) {
      HfModelWeights base(src.dir);
      for (std::size_t p = 0; p < layout.params().size(); ++p) {
        const ParamSpec& spec = layout.params()[p];
        to_qlora_base_values(*src.qlora, base, spec.name, spec.shape, host + layout.offset(static_cast<int>(p)));
      }
      log << what << ": QLoRA checkpoint: its base's " << src.qlora->nf4_params.size()
          << " NF4 matrices as the run read them" << std::endl;
    }
  }
  if (!src.adapter.empty()) {
    merge_adapter_into_weights(src.adapter, layout, host, log);
    source += " + adapter " + src.adapter;
  }
}

}  // namespace

ChatModel open_chat_model(const std::string& dir_in, const std::string& what, TrainConfig cfg, std::ostream& log) {
  ModelSource src = locate_model(dir_in, what, log);
  const bool tokenizer_explicit = !source_of(cfg, "tokenizer_name_or_path").empty();
  const bool dir_has_tokenizer = path_exists(fs::path(src.dir) / "tokenizer.json");
  if (!src.run_checkpoint.empty()) {
    apply_run_recipe(cfg, read_checkpoint_metadata(src.run_checkpoint), src.run_checkpoint + "/metadata.json",
                     dir_has_tokenizer);
  }
  if (!tokenizer_explicit && dir_has_tokenizer) cfg.tokenizer_name_or_path = src.dir;
  src.adapter = cfg.adapter_path;
  redirect_lora_checkpoint(src, what, log);

  ChatModel cm;
  const nlohmann::json meta = read_model_shape(src, cfg, cm, log);
  cm.tokenizer = load_tokenizer(cfg.tokenizer_name_or_path);
  if (cfg.model.vocab_size < cm.tokenizer->vocab_size()) {
    throw ConfigError("the model's vocab_size " + std::to_string(cfg.model.vocab_size) + " (" + cm.source +
                      ") is smaller than the tokenizer's " + std::to_string(cm.tokenizer->vocab_size()) + " (" +
                      cm.tokenizer->fingerprint() + "); set tokenizer_name_or_path to the model's tokenizer");
  }
  cm.encoder = std::make_unique<ChatEncoder>(
      *cm.tokenizer, resolve_chat_template(cfg.chat_template, cfg.tokenizer_name_or_path, *cm.tokenizer));

  const ComputeDtype dtype = compute_dtype_of(cfg.bf16, cfg.fp16);
  cm.model = std::make_unique<Decoder>(cfg.model, dtype);
  cm.model->set_logits_chunk_tokens(cfg.logits_chunk_tokens);
  configure_attention(*cm.model, cfg.attn_implementation);
  const ParamLayout& layout = cm.model->layout();
  cm.params = std::make_unique<LocalParams>(layout);
  auto host = Kokkos::create_mirror_view(cm.params->weights());
  read_chat_weights(src, meta, layout, host.data(), what, cm.source, log);
  Kokkos::deep_copy(cm.params->weights(), host);
  round_to_compute_dtype(dtype, cm.params->weights());
  log << "model " << cm.source << ": " << layout.total_numel() << " parameters, " << compute_dtype_name(dtype)
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
