#include "train/generate.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "config/hf_model_config.hpp"
#include "config/recipe_schema.hpp"
#include "data/sft_data.hpp"
#include "data/tokenizer.hpp"
#include "kernels/elementwise.hpp"
#include "model/decoder_cache.hpp"
#include "train/consolidate.hpp"
#include "train/hf_export.hpp"
#include "train/pretrained.hpp"
#include "train/trainer.hpp"

namespace shardft {

namespace fs = std::filesystem;

// ---- the sampler ---------------------------------------------------------------------------------

namespace {
std::string number_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
}  // namespace

void check_sampling_options(const SamplingOptions& opt) {
  if (!std::isfinite(opt.temperature) || opt.temperature < 0) {
    throw std::invalid_argument("temperature: expected a number >= 0 (0: greedy), got " + number_text(opt.temperature));
  }
  if (!(opt.top_p > 0 && opt.top_p <= 1)) {
    throw std::invalid_argument("top_p: expected a number in (0, 1], got " + number_text(opt.top_p));
  }
  if (opt.top_k < 0)
    throw std::invalid_argument("top_k: expected an integer >= 0 (0: no limit), got " + std::to_string(opt.top_k));
}

namespace {
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

SamplingRng::SamplingRng(std::uint64_t seed, std::uint64_t stream) {
  // Two rounds of mixing, so that neighbouring (seed, stream) pairs start far apart.
  std::uint64_t s = seed;
  const std::uint64_t a = splitmix64(s);
  s = a ^ (stream * 0xD1B54A32D192ED03ull);
  state_ = splitmix64(s);
}

std::uint64_t SamplingRng::next() { return splitmix64(state_); }

double SamplingRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

namespace {

// The first of equal maxima, as evaluation always picked (NaN never wins).
std::int32_t argmax(const float* logits, int vocab) {
  int best = 0;
  for (int v = 1; v < vocab; ++v) best = logits[v] > logits[best] ? v : best;
  return best;
}

}  // namespace

std::vector<std::pair<std::int32_t, double>> sampling_distribution(const float* logits, int vocab,
                                                                   const SamplingOptions& opt) {
  if (vocab < 1) throw std::invalid_argument("sampling: empty vocabulary");
  check_sampling_options(opt);
  if (opt.greedy()) return {{argmax(logits, vocab), 1.0}};
  // Scaled logits; NaN counts as impossible, and keeps the ordering strict.
  std::vector<double> z(static_cast<std::size_t>(vocab));
  for (int v = 0; v < vocab; ++v) {
    z[v] = std::isnan(logits[v]) ? -std::numeric_limits<double>::infinity() : logits[v] / opt.temperature;
  }
  std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](std::int32_t a, std::int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  std::size_t keep = order.size();
  if (opt.top_k > 0 && static_cast<std::size_t>(opt.top_k) < order.size()) {
    keep = static_cast<std::size_t>(opt.top_k);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), before);
  } else {
    std::sort(order.begin(), order.end(), before);
  }
  const double top = z[order[0]];
  if (!std::isfinite(top)) return {{order[0], 1.0}};  // nothing finite to weigh: the first candidate
  std::vector<double> p(keep);
  double sum = 0;
  for (std::size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(z[order[i]] - top);
  // The nucleus: the fewest most likely tokens whose probability (within the top_k) reaches top_p.
  if (opt.top_p < 1.0) {
    double mass = 0;
    std::size_t n = 0;
    while (n < keep) {
      mass += p[n++] / sum;
      if (mass >= opt.top_p) break;
    }
    keep = n;
  }
  double kept = 0;
  for (std::size_t i = 0; i < keep; ++i) kept += p[i];
  std::vector<std::pair<std::int32_t, double>> dist;
  dist.reserve(keep);
  for (std::size_t i = 0; i < keep; ++i) dist.emplace_back(order[i], p[i] / kept);
  return dist;
}

std::int32_t sample_token(const float* logits, int vocab, const SamplingOptions& opt, SamplingRng& rng) {
  if (opt.greedy()) {
    if (vocab < 1) throw std::invalid_argument("sampling: empty vocabulary");
    return argmax(logits, vocab);
  }
  const auto dist = sampling_distribution(logits, vocab, opt);
  const double u = rng.uniform();
  double acc = 0;
  for (const auto& [token, prob] : dist) {
    acc += prob;
    if (u < acc) return token;
  }
  return dist.back().first;  // rounding left u above the last partial sum
}

// ---- the decoding loop ---------------------------------------------------------------------------

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::context:
      return "context";
  }
  return "?";
}

std::vector<Generation> generate(Decoder& model, ParamSource& params,
                                 const std::vector<std::vector<std::int32_t>>& prompts, int max_new_tokens,
                                 int max_seq_length, const std::vector<std::int32_t>& stop_ids, std::int32_t pad_id,
                                 const SamplingOptions& opt, std::uint64_t first_stream, bool use_cache) {
  check_sampling_options(opt);
  const int vocab = model.config().vocab_size;
  const int rows = static_cast<int>(prompts.size());
  std::vector<std::vector<std::int32_t>> seqs = prompts;
  std::vector<Generation> out(static_cast<std::size_t>(rows));
  std::vector<SamplingRng> rngs;
  std::vector<int> active;
  for (int r = 0; r < rows; ++r) {
    rngs.emplace_back(opt.seed, first_stream + static_cast<std::uint64_t>(r));
    if (seqs[r].empty()) throw std::invalid_argument("generate: prompt " + std::to_string(r) + " is empty");
    if (static_cast<int>(seqs[r].size()) >= max_seq_length) {
      out[r].finish = FinishReason::context;
    } else if (max_new_tokens > 0) {
      active.push_back(r);
    }
  }
  // One step for every active row: its next token from its row of logits ([active rows, vocab], in
  // `active` order), then the stop rules; `active` keeps the rows that go on.
  std::vector<float> row_logits(static_cast<std::size_t>(vocab));
  auto advance = [&](const View2<float>& logits) {
    auto logits_h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), logits);
    std::vector<int> still;
    for (std::size_t i = 0; i < active.size(); ++i) {
      const int r = active[i];
      for (int v = 0; v < vocab; ++v) row_logits[v] = logits_h(i, v);
      const std::int32_t token = sample_token(row_logits.data(), vocab, opt, rngs[r]);
      if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
        out[r].finish = FinishReason::stop;
        continue;
      }
      seqs[r].push_back(token);
      out[r].tokens.push_back(token);
      if (static_cast<int>(out[r].tokens.size()) >= max_new_tokens) {
        out[r].finish = FinishReason::length;
      } else if (static_cast<int>(seqs[r].size()) >= max_seq_length) {
        out[r].finish = FinishReason::context;
      } else {
        still.push_back(r);
      }
    }
    active = std::move(still);
  };

  if (!use_cache) {
    for (int step = 0; step < max_new_tokens && !active.empty(); ++step) {
      const int n = static_cast<int>(active.size());
      int seq = 0;
      for (int r : active) seq = std::max<int>(seq, static_cast<int>(seqs[r].size()));
      // Each new token re-runs the whole sequences; right padding never reaches the last real token
      // because attention is causal.
      TokenBatch b;
      b.batch = n;
      b.seq = seq;
      b.input_ids.assign(static_cast<std::size_t>(n) * seq, pad_id);
      b.position_ids.resize(b.input_ids.size());
      b.seq_ids.assign(b.input_ids.size(), 0);
      b.targets.assign(b.input_ids.size(), kIgnoreIndex);
      View1<std::int32_t> last("last_rows", n);
      auto last_h = Kokkos::create_mirror_view(last);
      for (int i = 0; i < n; ++i) {
        const auto& s = seqs[active[i]];
        std::copy(s.begin(), s.end(), b.input_ids.begin() + static_cast<std::ptrdiff_t>(i) * seq);
        for (int t = 0; t < seq; ++t) b.position_ids[static_cast<std::size_t>(i) * seq + t] = t;
        last_h(i) = i * seq + static_cast<int>(s.size()) - 1;
      }
      Kokkos::deep_copy(last, last_h);
      View2<float> logits("gen_logits", n, vocab);
      model.forward_logits(to_model_inputs(b), params, last, logits);
      advance(logits);
    }
    return out;
  }

  if (active.empty()) return out;
  // With the KV cache: the prompts once (prefill), then each step feeds only the rows' newest tokens.
  // A row never holds more than min(max_seq_length, prompt + max_new_tokens) tokens.
  const int n0 = static_cast<int>(active.size());
  std::vector<int> slot(static_cast<std::size_t>(rows), -1);  // a prompt's row in the cache
  std::vector<std::vector<std::int32_t>> first;
  std::int64_t max_len = 0;
  for (int i = 0; i < n0; ++i) {
    const int r = active[i];
    slot[r] = i;
    first.push_back(seqs[r]);
    max_len = std::max(max_len, std::min<std::int64_t>(max_seq_length, static_cast<std::int64_t>(seqs[r].size()) +
                                                                          max_new_tokens));
  }
  KvCache cache(model.config(), n0, static_cast<int>(max_len));
  View2<float> logits_all("gen_logits", n0, vocab);
  model.prefill(first, params, cache, logits_all);
  advance(logits_all);
  while (!active.empty()) {
    const int n = static_cast<int>(active.size());
    std::vector<int> cache_rows;
    std::vector<std::int32_t> tokens;
    for (int r : active) {
      cache_rows.push_back(slot[r]);
      tokens.push_back(seqs[r].back());
    }
    View2<float> logits(logits_all.data(), n, vocab);  // the first n rows of the prefill's buffer
    model.decode_step(cache_rows, tokens, params, cache, logits);
    advance(logits);
  }
  return out;
}

// ---- a model to talk to ------------------------------------------------------------------------

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

void check_checkpoint_layout(const nlohmann::json& meta, const ParamLayout& layout, const std::string& meta_path) {
  const auto& params = meta.at("params");
  if (meta.at("total_numel").get<std::int64_t>() != layout.total_numel() || params.size() != layout.params().size()) {
    throw FormatError(meta_path + ": its parameter table does not match its model " + meta.at("model").dump());
  }
  for (std::size_t p = 0; p < params.size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (params[p].at("name") != spec.name || params[p].at("shape").get<std::vector<std::int64_t>>() != spec.shape ||
        params[p].at("layout_offset").get<std::int64_t>() != layout.offset(static_cast<int>(p))) {
      throw FormatError(meta_path + ": parameter '" + params[p].at("name").get<std::string>() +
                        "' is not where the model " + meta.at("model").dump() + " has it");
    }
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

  ChatModel cm;
  int sliding_window = 0;
  nlohmann::json meta;
  if (checkpoint) {
    meta = dir == run_checkpoint ? run_meta : read_checkpoint_metadata(dir);
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
      *cm.tokenizer, chat_template_for(parse_chat_template_kind(cfg.chat_template), *cm.tokenizer));

  cm.model = std::make_unique<Decoder>(cfg.model, cfg.bf16 ? ComputeDtype::bf16 : ComputeDtype::fp32);
  cm.model->set_logits_chunk_tokens(cfg.logits_chunk_tokens);
  cm.model->set_memory_efficient_attention(cfg.attn_implementation == "memory_efficient");
  const ParamLayout& layout = cm.model->layout();
  cm.params = std::make_unique<LocalParams>(layout);
  auto host = Kokkos::create_mirror_view(cm.params->weights());
  if (checkpoint) {
    check_checkpoint_layout(meta, layout, dir + "/metadata.json");
    read_checkpoint_master(dir, meta, 0, layout.total_numel(), host.data());
  } else {
    read_pretrained_weights(layout, dir, host.data());
  }
  Kokkos::deep_copy(cm.params->weights(), host);
  if (cfg.bf16) round_to_bf16(cm.params->weights(), cm.params->weights());
  log << "model " << cm.source << ": " << layout.total_numel() << " parameters, " << (cfg.bf16 ? "bf16" : "fp32")
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
    const bool trims = encoder.chat_template().kind == ChatTemplateKind::llama3;
    p.reference = trims ? python_strip(conv.back().content) : conv.back().content;
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
