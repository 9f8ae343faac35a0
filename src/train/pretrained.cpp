#include "train/pretrained.hpp"

#include <set>

#include "io/hf_weights.hpp"

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

}  // namespace

std::vector<std::string> check_pretrained_weights(const ParamLayout& layout, const std::string& dir) {
  HfModelWeights weights(dir);
  return check_weights(weights, layout);
}

void load_pretrained_weights(ZeroEngine& engine, const ParamLayout& layout, const std::string& dir) {
  HfModelWeights weights(dir);
  check_weights(weights, layout);
  engine.load_weights([&](int param, std::int64_t first, std::int64_t count, float* out) {
    weights.read(layout.params()[param].name, first, count, out);
  });
}

void read_pretrained_weights(const ParamLayout& layout, const std::string& dir, float* flat) {
  HfModelWeights weights(dir);
  check_weights(weights, layout);
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    weights.read(spec.name, 0, spec.numel(), flat + layout.offset(static_cast<int>(p)));
  }
}

}  // namespace shardft
