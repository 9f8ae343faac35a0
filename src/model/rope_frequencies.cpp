#include "model/rope_frequencies.hpp"

#include <algorithm>
#include <cmath>

namespace shardft {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Llama 3.1: long wavelengths (beyond the original context / low_freq_factor) are stretched by factor,
// short ones (below original / high_freq_factor) kept, and the band between blended linearly in
// original / wavelength.
void llama3(const RopeScaling& s, std::vector<double>& f) {
  const double original = s.original_max_position_embeddings;
  const double low_wavelen = original / s.low_freq_factor, high_wavelen = original / s.high_freq_factor;
  for (double& inv : f) {
    const double wavelen = 2 * kPi / inv;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      inv /= s.factor;
    } else {
      const double smooth = (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      inv = (1 - smooth) * inv / s.factor + smooth * inv;
    }
  }
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// YaRN: dimensions that turn more than beta_fast times over the original context keep their frequency,
// those turning fewer than beta_slow times are interpolated (divided by factor), a linear ramp between.
// The original context is rope_scaling's original_max_position_embeddings where given (as transformers 5,
// vLLM and the paper read it; transformers 4.46 ignores the key), else max_position_embeddings.
void yarn(const ModelConfig& m, std::vector<double>& f) {
  const RopeScaling& s = m.rope_scaling;
  const int dim = m.head_dim();
  const double original =
      s.original_max_position_embeddings > 0 ? s.original_max_position_embeddings : m.max_position_embeddings;
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2 * kPi)) / (2 * std::log(m.rope_theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;  // transformers' guard against a zero-width ramp
  for (std::size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double keep = 1 - ramp;  // the share of the unscaled frequency
    f[i] = f[i] / s.factor * (1 - keep) + f[i] * keep;
  }
}

}  // namespace

std::int64_t rope_frequency_length(const ModelConfig& m, std::int64_t seq_len) {
  return m.rope_scaling.type == "dynamic" ? std::max<std::int64_t>(seq_len, m.max_position_embeddings) : 0;
}

std::vector<double> rope_inv_freq(const ModelConfig& m, std::int64_t seq_len) {
  const RopeScaling& s = m.rope_scaling;
  const int dim = m.head_dim();
  if (s.type == "dynamic" && seq_len > m.max_position_embeddings) {
    const double ratio = s.factor * static_cast<double>(seq_len) / m.max_position_embeddings - (s.factor - 1);
    return plain_rope_inv_freq(dim, m.rope_theta * std::pow(ratio, static_cast<double>(dim) / (dim - 2)));
  }
  std::vector<double> f = plain_rope_inv_freq(dim, m.rope_theta);
  if (s.type == "linear") {
    for (double& inv : f) inv /= s.factor;
  } else if (s.type == "llama3") {
    llama3(s, f);
  } else if (s.type == "yarn") {
    yarn(m, f);
  }
  return f;
}

double rope_attention_scaling(const ModelConfig& m) {
  const RopeScaling& s = m.rope_scaling;
  if (s.type != "yarn") return 1.0;
  if (s.attention_factor > 0) return s.attention_factor;
  if (s.mscale > 0 && s.mscale_all_dim > 0) {
    return yarn_mscale(s.factor, s.mscale) / yarn_mscale(s.factor, s.mscale_all_dim);
  }
  return yarn_mscale(s.factor, 1.0);
}

RopeTable make_model_rope_table(const ModelConfig& m, std::int64_t positions, std::int64_t seq_len) {
  return make_rope_table(positions, rope_inv_freq(m, seq_len), rope_attention_scaling(m));
}

}  // namespace shardft
