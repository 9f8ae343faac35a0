#pragma once
// One sequence and one kv head's group of query heads of a causal GQA attention, as the host's fused
// kernels take it (kernels/amx_attention_bf16.hpp with bf16 bits, kernels/avx512_attention_fp32.hpp with
// fp32 values): k and v [seq, head_dim] of the kv head (rows ld apart), and the query heads that share it,
// head h's q at q + h * head_dim (rows ldq apart).
#include <cstdint>

namespace shardft {

template <class T>
struct AttentionGroupOf {
  int seq = 0, head_dim = 0, heads = 0;
  float scale = 0.f;
  const std::int32_t* seq_ids = nullptr;  // [seq]
  const T* q = nullptr;
  std::int64_t ldq = 0;
  const T* k = nullptr;
  std::int64_t ldk = 0;
  const T* v = nullptr;
  std::int64_t ldv = 0;
};

}  // namespace shardft
