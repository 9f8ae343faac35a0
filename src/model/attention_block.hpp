#pragma once
// The attention half of a decoder layer (HF LlamaAttention with its pre-norm and residual):
//   h = RMSNorm(x);  q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv
//   Qwen3 (qk_norm): q, k = RMSNorm_qn(each head of q), RMSNorm_kn(each head of k)
//   RoPE(q, k) at each token's position;  o = causal grouped-query attention(q, k, v);  out = x + o Wo^T + bo
// Training and generation run this same forward; generation hands it a layer's KV cache, into which the
// step's keys and values go, and from which a decode step's queries read.
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/attention_decode.hpp"
#include "kernels/attention_fused.hpp"
#include "kernels/rope.hpp"
#include "model/growing_buffer.hpp"
#include "model/linear.hpp"

namespace shardft {

struct AttentionWeights {
  NormWeight norm;  // input_layernorm
  float norm_eps = 0.f;
  Linear q, k, v, o;
  Unmanaged1<const float> q_norm, k_norm;  // [head_dim] each; empty without qk_norm
  // q, k and v as one layer [Wq; Wk; Wv] (Linear::stack), where they have no bias, their weights lie back
  // to back and there is no qk_norm between projection and RoPE: one GEMM each way instead of three (their
  // LoRA terms, if any, terms of the stacked layer).
  Linear qkv;
  bool qkv_stacked = false;
  bool qk_norm() const { return q_norm.extent(0) > 0; }
};

struct AttentionGrads {
  GradWrite norm;  // the input norm's weight
  LinearGrads q, k, v, o;
  Unmanaged1<float> q_norm, k_norm;  // empty without qk_norm
};

// The attention of layer P of an acquired block, and where its gradients go.
AttentionWeights attention_weights_of(ParamSource& params, const ParamLayout& layout, const LayerParams& P,
                                      float norm_eps, ComputeDtype dtype);
AttentionGrads attention_grads_of(GradSink& grads, const ParamLayout& layout, const LayerParams& P);

// The tokens of one forward as attention sees them: shape.batch rows of shape.seq tokens, each at a
// RoPE position, attending causally to the tokens of its row with the same seq_id (packed samples never
// see each other).
struct AttentionTokens {
  AttentionShape shape;
  Unmanaged1<const std::int32_t> positions, seq_ids;
  const RopeTable* rope = nullptr;
  // Keep a log-sum-exp per query instead of the probabilities, and recompute them in backward
  // (kernels/attention_lse.hpp).
  bool memory_efficient = false;
  // The fused bf16 kernels (kernels/attention_fused.hpp) over these segments instead (bf16 compute only);
  // their statistics are kept in lse.
  bool fused = false;
  AttentionSegments segments;
  bool fused_column_blocks = true;  // the fused kernels read q, k, v as column blocks of one array

  std::int64_t num_tokens() const { return static_cast<std::int64_t>(shape.batch) * shape.seq; }
};

// Decoding: each query is a row's newest token and attends over that row's cached positions.
struct KvCacheReads {
  DecodeAttentionShape shape;
  Unmanaged1<const std::int32_t> slot, len;  // per query: its cache row, and that row's filled length
};

// One layer's KV cache in a generation step (model/decoder_cache.hpp).
struct LayerKvCache {
  Unmanaged2<float> k, v;                // the layer's cache, [rows * max_len, kv_heads * head_dim]
  Unmanaged1<const std::int64_t> dest;   // each step token's row in it; -1: padding, never cached
  const KvCacheReads* reads = nullptr;   // null (prefill): the step's tokens attend among themselves
};

// What forward keeps for backward; h and o are GEMM inputs, bf16 in bf16 compute. q, k, v (after RoPE)
// are the attention kernel's inputs, which its backward reads again: kept_as(dtype, every_layer). With
// qk_norm also the projections' q and k before their norms (the norms' backward reads them) and each
// head's 1 / rms. A bf16 step with stacked q/k/v projections keeps them as one [tokens, q | k | v] array
// (qkv), the stacked GEMM's output, which the attention kernels read as column blocks.
struct AttentionActivations {
  bool every_layer = false;  // one of every layer's, kept together until backward (model/linear.hpp Kept)
  LinearInput h{"attn_h"}, o{"o"};
  KeptActivation q{"q"}, k{"k"}, v{"v"}, q_proj{"q_proj"}, k_proj{"k_proj"}, qkv{"qkv"};
  LoraKept qkv_lora{"qkv_lora_u"}, o_lora{"o_lora_u"};  // the stacked q/k/v's and o's LoRA u (packed path: qkv)
  GrowingBuffer rstd{"attn_rstd"}, q_rstd{"q_rstd"}, k_rstd{"k_rstd"}, probs{"probs"}, lse{"lse"};
};

// Backward's scratch, shared by every layer.
struct AttentionGradBuffers {
  GrowingBuffer dattn{"dattn"}, dq{"dq"}, dk{"dk"}, dv{"dv"}, dscores{"dscores"}, delta{"delta"};
  GrowingBuffer dq_proj{"dq_proj"}, dk_proj{"dk_proj"};  // qk_norm: the gradients before the norms
  GrowingBuffer qkv_dw{"qkv_dw"};  // stacked q/k/v whose weight gradients are not back to back: dW first
};

// out = x + Attention(RMSNorm(x)); out may be x's own buffer (x and out both fp32 or both bf16). With a
// cache, the step's keys and values are appended to it first (rounded as q, k, v are kept, into the fp32
// cache). scratch: shared by the layers, here and in backward. keep_x: x is kept for backward first, by the
// norm (model/linear.hpp).
void attention_block_forward(const AttentionWeights& w, const AttentionTokens& t, const Residual& x,
                             AttentionActivations& a, const Residual& out, ActivationScratch& scratch,
                             const LayerKvCache* cache = nullptr, const StreamKeep& keep_x = {});

// dx holds d loss / d out on entry and d loss / d x on return (the residual passes dx through and the
// branch adds to it); the weights' gradients are added into g. dh: scratch for the gradient at the norm's
// output (model/linear.hpp).
// dx_rounded (bf16 compute; empty otherwise): dx rounded to bf16, on entry and on return.
void attention_block_backward(const AttentionWeights& w, const AttentionGrads& g, const AttentionTokens& t,
                              const GemmOperand& x, AttentionActivations& a, Unmanaged2<float> dx,
                              Unmanaged2<bf16> dx_rounded, NormOutputGrad& dh, AttentionGradBuffers& b,
                              ActivationScratch& scratch);

}  // namespace shardft
