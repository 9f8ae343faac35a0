#pragma once
// The KV cache of generation (HF generate's use_cache=True): every layer's keys and values, after RoPE,
// of the tokens each row has seen so far. Decoder::prefill fills it from the prompts and
// Decoder::decode_step appends one token per row (model/decoder_cache.cpp), so a new token costs one
// token's forward instead of the whole prefix's.
#include <memory>
#include <vector>

#include "config/model_config.hpp"
#include "kernels/types.hpp"

namespace shardft {

struct KvCache {
  // Room for `rows` sequences of up to `max_len` tokens each (prompt and generated tokens together).
  KvCache(const ModelConfig& cfg, int rows, int max_len);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int rows = 0, max_len = 0;
  // [layers, rows, max_len, kv_heads * head_dim]: position t of row r of layer l at k(l, r, t, :).
  View4<float> k, v;
  std::vector<int> length;  // positions filled, per row

  // A layer's cache as the matrix the attention kernel reads: [rows * max_len, kv_heads * head_dim].
  Unmanaged2<float> layer_k(int layer) const;
  Unmanaged2<float> layer_v(int layer) const;

  // The incremental forward's scratch and RoPE table, kept from step to step (model/decoder_cache.cpp).
  struct Work;
  std::unique_ptr<Work> work;
};

}  // namespace shardft
