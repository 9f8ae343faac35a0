#pragma once
// The tiny decoder, LoRA spec, batch and initialisation the LoRA model tests share.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "finite_difference.hpp"
#include "model/decoder.hpp"

namespace shardft {
namespace lora_test {

inline ModelConfig small_model(bool qkv_bias) {
  ModelConfig cfg;
  cfg.vocab_size = 64;
  cfg.hidden_size = 16;
  cfg.num_hidden_layers = 2;
  cfg.num_attention_heads = 4;
  cfg.num_key_value_heads = 2;
  cfg.intermediate_size = 24;
  cfg.max_position_embeddings = 32;
  cfg.initializer_range = 0.3;
  cfg.qkv_bias = qkv_bias;
  return cfg;
}

inline LoraSpec all_linear(int r, double dropout) {
  LoraSpec s;
  s.enabled = true;
  s.r = r;
  s.alpha = 3.0;
  s.dropout = dropout;
  s.targets.fill(true);
  return s;
}

// batch rows of seq random tokens, one sample per row, next-token targets.
inline ModelInputs random_batch(int batch, int seq) {
  std::vector<std::int32_t> ids, pos, seq_ids, targets;
  const auto r = kernel_test::random_vector(batch * seq, 11, 0.f, 63.f);
  for (int i = 0; i < batch * seq; ++i) {
    ids.push_back(static_cast<std::int32_t>(r[i]));
    pos.push_back(i % seq);
    seq_ids.push_back(0);
  }
  for (int i = 0; i < batch * seq; ++i) targets.push_back(i % seq + 1 < seq ? ids[i + 1] : kIgnoreIndex);
  return upload_inputs(batch, seq, ids, pos, seq_ids, targets);
}

// Base from the seed, every B random (PEFT's B = 0 would leave A's gradient zero).
inline void init_with_random_b(const ParamLayout& layout, const ModelConfig& cfg, LocalParams& params) {
  init_params(layout, cfg, 3, params.weights());
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), params.weights());
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    if (layout.params()[p].kind != ParamKind::lora_b) continue;
    const auto v = kernel_test::random_vector(layout.params()[p].numel(), 100 + static_cast<std::uint32_t>(p), -0.3f, 0.3f);
    for (std::size_t i = 0; i < v.size(); ++i) host(layout.offset(static_cast<int>(p)) + i) = v[i];
  }
  Kokkos::deep_copy(params.weights(), host);
}

// Central differences (eps 1e-2) of loss() at three elements of every parameter `which` picks, element 0,
// numel / divisor and the last, against grads (the flat analytic gradient): each to 2e-2 relative (or
// 2e-2 absolute where |fd| < 1e-2). Restores every element it moves. Returns the worst relative error
// and counts the elements it checked into *checked.
inline double check_finite_differences(const ParamLayout& layout, LocalParams& params, const std::vector<float>& grads,
                                       const std::function<double()>& loss, std::int64_t divisor, int* checked,
                                       const std::function<bool(const ParamSpec&)>& which) {
  double worst = 0.0;
  for (std::size_t p = 0; p < layout.params().size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (!which(spec)) continue;
    const std::int64_t off = layout.offset(static_cast<int>(p));
    for (std::int64_t i : {std::int64_t(0), spec.numel() / divisor, spec.numel() - 1}) {
      auto w = Kokkos::subview(params.weights(), off + i);
      float orig = 0.f;
      Kokkos::deep_copy(orig, w);
      const float eps = 1e-2f;
      Kokkos::deep_copy(w, orig + eps);
      const double up = loss();
      Kokkos::deep_copy(w, orig - eps);
      const double down = loss();
      Kokkos::deep_copy(w, orig);
      const double fd = (up - down) / (2.0 * eps), g = grads[off + i];
      const double err = std::abs(fd - g) / std::max(1e-2, std::abs(fd));
      worst = std::max(worst, err);
      EXPECT_LT(err, 2e-2) << spec.name << "[" << i << "]: analytic " << g << ", finite difference " << fd;
      ++*checked;
    }
  }
  return worst;
}

// The same over every LoRA factor.
inline double check_lora_finite_differences(const ParamLayout& layout, LocalParams& params,
                                            const std::vector<float>& grads, const std::function<double()>& loss,
                                            std::int64_t divisor, int* checked) {
  return check_finite_differences(layout, params, grads, loss, divisor, checked,
                                  [](const ParamSpec& spec) { return spec.is_lora(); });
}

// random_batch whose rows are samples 5, 9, 13, ... of some dataset: LoRA dropout's masks and NEFTune's
// noise key on (sample, position), as in a run.
inline ModelInputs sample_batch(int batch, int seq) {
  ModelInputs in = random_batch(batch, seq);
  std::vector<std::int32_t> samples;
  for (int i = 0; i < batch * seq; ++i) samples.push_back(5 + 4 * (i / seq));
  upload_sample_ids(in, samples);
  return in;
}

}  // namespace lora_test
}  // namespace shardft
