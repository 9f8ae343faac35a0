#pragma once
// transformers' gradients of tests/reference/hf/batch_grads.json (make_hf_head_dim_models.py) against a
// whole gradient in ParamLayout order: per parameter its L2 norm and GRAD_SAMPLES of its values (all of
// them for a small one, else flat elements i * numel / samples).
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/param_layout.hpp"
#include "tests/common/relative_difference.hpp"

namespace shardft {
namespace testing_util {

struct GradMismatch {
  double worst = 0;         // the largest relative difference, of a norm or of a sample vector
  std::string where;        // which parameter and which of the two, or what does not match
  int params_compared = 0;
};

inline GradMismatch compare_hf_grads(const nlohmann::json& fx_grads, const ParamLayout& layout,
                                     const std::vector<float>& grads) {
  GradMismatch m;
  const auto note = [&](double d, const std::string& what) {
    if (!(d <= m.worst)) {  // NaN counts as the worst
      m.worst = std::isnan(d) ? INFINITY : d;
      m.where = what;
    }
  };
  const std::size_t ours = layout.params().size();  // tied: the embedding once, as in named_parameters()
  if (fx_grads.size() != ours) {
    note(INFINITY, "the fixture has " + std::to_string(fx_grads.size()) + " parameters, the layout " +
                       std::to_string(ours));
  }
  for (auto it = fx_grads.begin(); it != fx_grads.end(); ++it) {
    int p = -1;
    try {
      p = layout.index(it.key());
    } catch (const std::out_of_range&) {
      note(INFINITY, it.key() + ": not in the layout");
      continue;
    }
    const std::int64_t n = layout.params()[p].numel(), off = layout.offset(p);
    if (n != it.value().at("numel").get<std::int64_t>()) {
      note(INFINITY, it.key() + ": numel differs");
      continue;
    }
    double sq = 0;
    for (std::int64_t i = 0; i < n; ++i) sq += double(grads[off + i]) * grads[off + i];
    const double ref_norm = it.value().at("norm").get<double>();
    note(std::abs(std::sqrt(sq) - ref_norm) / ref_norm, it.key() + " (norm)");
    const auto ref = it.value().at("values").get<std::vector<float>>();
    const std::int64_t k = static_cast<std::int64_t>(ref.size());
    std::vector<float> got;
    for (std::int64_t i = 0; i < k; ++i) got.push_back(grads[off + (k == n ? i : i * n / k)]);
    note(rel_diff(got, ref), it.key() + " (values)");
    ++m.params_compared;
  }
  return m;
}

}  // namespace testing_util
}  // namespace shardft
