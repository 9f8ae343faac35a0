#include "train/pretrained.hpp"

#include "io/hf_weights.hpp"

namespace shardft {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Check every name and shape before reading anything, so that a wrong file fails the same way on
// every rank, whatever it owns.
void check_weights(HfModelWeights& weights, const ParamLayout& layout) {
  for (const ParamSpec& p : layout.params()) {
    if (!weights.has(p.name)) {
      throw FormatError(weights.description() + ": no tensor '" + p.name + "' (the model's config.json needs it)");
    }
    if (weights.shape(p.name) != p.shape) {
      throw FormatError(weights.description() + ": tensor '" + p.name + "' has shape " +
                        shape_text(weights.shape(p.name)) + ", config.json implies " + shape_text(p.shape));
    }
  }
}

}  // namespace

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
