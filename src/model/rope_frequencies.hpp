#pragma once
// The model's RoPE frequencies and cos / sin scaling, as transformers computes them from config.json's
// rope_theta and rope_scaling (modeling_rope_utils), in double.
#include <cstdint>
#include <vector>

#include "config/model_config.hpp"
#include "kernels/rope.hpp"

namespace shardft {

// inv_freq[i], i < head_dim / 2, for a forward call whose largest position id is seq_len - 1. Only
// "dynamic" depends on seq_len: plain frequencies up to max_position_embeddings, an NTK-rescaled base
// beyond (transformers recomputes them per call from max(position_ids) + 1).
std::vector<double> rope_inv_freq(const ModelConfig& m, std::int64_t seq_len);

// The factor on cos and sin: YaRN's attention factor, 1.0 for every other type.
double rope_attention_scaling(const ModelConfig& m);

// The length rope_inv_freq's answer depends on: max(seq_len, max_position_embeddings) for dynamic, 0 for
// every other type. Two calls with the same value can share a table.
std::int64_t rope_frequency_length(const ModelConfig& m, std::int64_t seq_len);

// The table of positions [0, positions) for a call whose largest position id is seq_len - 1.
RopeTable make_model_rope_table(const ModelConfig& m, std::int64_t positions, std::int64_t seq_len);

}  // namespace shardft
