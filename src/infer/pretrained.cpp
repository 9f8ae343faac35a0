#include "infer/pretrained.hpp"

#include <cmath>
#include <optional>
#include <set>

#include "io/hf_weights.hpp"
#include "comm/collective_error.hpp"

namespace shardft {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Check every name and shape before reading anything, so that a wrong file fails the same way on
// every rank, whatever it owns. Returns the tensors left out on purpose.
std::vector<std::string> check_weights(HfModelWeights& weights, const ParamLayout& layout) {
  std::set<std::string> used;
  for (const ParamSpec& p : layout.params()) {
    if (p.is_lora()) continue;  // LoRA factors come from their initialisation or an adapter, not the base
    if (!weights.has(p.name)) {
      throw FormatError(weights.description() + ": no tensor '" + p.name + "' (the model's config.json needs it)");
    }
    if (weights.shape(p.name) != p.shape) {
      throw FormatError(weights.description() + ": tensor '" + p.name + "' has shape " +
                        shape_text(weights.shape(p.name)) + ", config.json implies " + shape_text(p.shape));
    }
    used.insert(p.name);
  }
  std::vector<std::string> ignored, unused;
  for (const std::string& name : weights.names()) {
    if (used.count(name)) continue;
    if (ends_with(name, ".rotary_emb.inv_freq")) {
      ignored.push_back(name + " (RoPE's frequencies, recomputed from config.json)");
    } else if (name == "lm_head.weight" && layout.lm_head() == layout.embed_tokens()) {
      ignored.push_back(name + " (tie_word_embeddings: the LM head is model.embed_tokens.weight)");
    } else {
      unused.push_back(name);
    }
  }
  if (!unused.empty()) {
    std::string list;
    for (std::size_t i = 0; i < unused.size() && i < 4; ++i) list += (i ? ", '" : "'") + unused[i] + "'";
    if (unused.size() > 4) list += " and " + std::to_string(unused.size() - 4) + " more";
    throw FormatError(weights.description() + ": " + std::to_string(unused.size()) +
                      " tensor(s) the model of config.json has no parameter for: " + list +
                      " (does num_hidden_layers, tie_word_embeddings or the architecture match the weights?)");
  }
  return ignored;
}

// "" when every value is finite, else the tensor, the element and the value.
std::string nonfinite_weight_problem(HfModelWeights& weights, const std::string& name, std::int64_t first,
                                     const float* values, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      return weights.description() + ": tensor '" + name + "' holds " + (std::isnan(values[i]) ? "NaN" : "Inf") +
             " at flat element " + std::to_string(first + i) + " of its " + shape_text(weights.shape(name)) +
             "; a model with non-finite weights cannot train";
    }
  }
  return "";
}

}  // namespace

std::vector<std::string> check_pretrained_weights(const ParamLayout& layout, const std::string& dir) {
  HfModelWeights weights(dir);
  return check_weights(weights, layout);
}

void load_pretrained_weights(ZeroEngine& engine, const ParamLayout& layout, const std::string& dir,
                             Communicator& world) {
  HfModelWeights weights(dir);
  check_weights(weights, layout);
  // Each rank reads only its slices, so only some ranks may meet a bad value: the load completes
  // everywhere (its collectives carry the NaN harmlessly), then all ranks agree and stop together.
  std::string bad;
  engine.load_weights(
      [&](int param, std::int64_t first, std::int64_t count, float* out) {
        const std::string& name = layout.params()[param].name;
        weights.read(name, first, count, out);
        if (bad.empty()) bad = nonfinite_weight_problem(weights, name, first, out, count);
      },
      layout.has_frozen() ? ParamSet::frozen : ParamSet::all,
      // A bitsandbytes 4-bit save's matrices are QLoRA's NF4 as they are (their scales checked finite).
      [&](int param) -> std::optional<Nf4Tensor> {
        const std::string& name = layout.params()[param].name;
        if (!weights.is_nf4(name)) return std::nullopt;
        return weights.read_nf4(name);
      });
  const std::string error = first_error(world, bad);
  if (!error.empty()) throw FormatError(error);
}

void read_pretrained_weights(const ParamLayout& layout, const std::string& dir, float* flat) {
  HfModelWeights weights(dir);
  check_weights(weights, layout);
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (spec.is_lora()) continue;
    float* out = flat + layout.offset(static_cast<int>(p));
    weights.read(spec.name, 0, spec.numel(), out);
    const std::string bad = nonfinite_weight_problem(weights, spec.name, 0, out, spec.numel());
    if (!bad.empty()) throw FormatError(bad);
  }
}

}  // namespace shardft
