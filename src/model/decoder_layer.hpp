#pragma once
// One decoder layer (HF LlamaDecoderLayer): two pre-norm residual blocks in turn,
//   x_mid = x + Attention(RMSNorm(x));   out = x_mid + MLP(RMSNorm(x_mid))
// (model/attention_block.hpp, model/mlp_block.hpp). Training, checkpointing's recompute, forward-only
// runs and KV-cache generation all run this forward.
#include "config/model_config.hpp"
#include "model/attention_block.hpp"
#include "model/mlp_block.hpp"

namespace shardft {

struct LayerWeights {
  AttentionWeights attention;
  MlpWeights mlp;
};

struct LayerGrads {
  AttentionGrads attention;
  MlpGrads mlp;
};

// Layer `layer`'s weights (its block acquired) and where its gradients go. gate_up_copy: see
// mlp_weights_of.
LayerWeights layer_weights_of(ParamSource& params, const ParamLayout& layout, const ModelConfig& cfg, int layer,
                              ComputeDtype dtype, GateUpCopy& gate_up_copy);
LayerGrads layer_grads_of(GradSink& grads, const ParamLayout& layout, int layer);

// What forward keeps for backward.
struct LayerActivations {
  AttentionActivations attention;
  GrowingBuffer x_mid{"x_mid"};
  MlpActivations mlp;
};

// Scratch shared by every layer: where bf16 compute stages its GEMM inputs in fp32 before keeping them
// as bf16, and backward's fp32 copies of them (model/linear.hpp LinearInput). Unused in fp32.
struct LayerStaging {
  GrowingBuffer staging{"gemm_input_staging"};
};

// Backward's scratch, shared by every layer.
struct LayerGradBuffers {
  GrowingBuffer dh{"dh"};
  AttentionGradBuffers attention;
  MlpGradBuffers mlp;
};

// out = layer(x). out may be x's own buffer: the residual stream is then updated in place and x_mid is
// not kept (runs without backward). An empty out rebuilds only what backward needs (checkpointing).
void decoder_layer_forward(const LayerWeights& w, const AttentionTokens& t, Unmanaged2<const float> x,
                           LayerActivations& a, Unmanaged2<float> out, LayerStaging& s,
                           const LayerKvCache* cache = nullptr);

// dx holds d loss / d out on entry and d loss / d x on return; the weights' gradients are added into g.
void decoder_layer_backward(const LayerWeights& w, const LayerGrads& g, const AttentionTokens& t,
                            Unmanaged2<const float> x, LayerActivations& a, Unmanaged2<float> dx, LayerGradBuffers& b,
                            LayerStaging& s);

}  // namespace shardft
