#pragma once
// The memory tests' model: d 64, 4 heads of 16 (q 64), 2 KV heads (k/v 32), I 96, 3 layers, vocab 300,
// untied; no memory cap, so a test can ask for any layout.
#include "config/train_config.hpp"

namespace shardft {
namespace testing_util {

inline TrainConfig small_model(int stage, bool bf16) {
  TrainConfig c;
  c.model.vocab_size = 300;
  c.model.hidden_size = 64;
  c.model.num_hidden_layers = 3;
  c.model.num_attention_heads = 4;
  c.model.num_key_value_heads = 2;
  c.model.intermediate_size = 96;
  c.model.tie_word_embeddings = false;
  c.zero_stage = stage;
  c.bf16 = bf16;
  c.max_memory_per_rank = "none";
  return c;
}

}  // namespace testing_util
}  // namespace shardft
