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
// Dropout with probability p on the input of every LoRA term of layer `layer` (training): each module's
// mask drawn from its own stream dropout_stream(seed, step, layer, module), rows keyed by row_key.
void set_layer_lora_dropout(LayerWeights& w, const LayerParams& P, int layer, float p, std::uint64_t seed,
                            std::int64_t step, Unmanaged1<const std::uint64_t> row_key);

// What forward keeps for backward. every_layer: one of every layer's, kept together until backward
// (training without checkpointing), which bf16 compute holds as bf16; else one layer's buffers that every
// layer reuses (model/linear.hpp Kept). x_mid, the residual stream between the blocks, is rounded as it is
// kept: the MLP block's input and residual are the kept values.
struct LayerActivations {
  explicit LayerActivations(bool every_layer = false);
  bool every_layer;
  AttentionActivations attention;
  KeptActivation x_mid{"x_mid"};
  MlpActivations mlp;
};

// fp32 scratch shared by every layer, used only in bf16 compute: the blocks' (model/linear.hpp
// ActivationScratch), x_mid's when it is held as bf16 by a layer that does not run in place (one that
// does writes x_mid into the stream itself), and the decoder's for the layer inputs it keeps as bf16 (the
// residual stream, updated there in place by each layer).
struct LayerStaging {
  ActivationScratch blocks;
  GrowingBuffer x_mid{"x_mid_staging"}, input{"layer_input_staging"};
  // A bf16 step's residual stream, updated in place by every layer (forward, and checkpointing's rebuild)
  GrowingBufferBf16 stream{"residual_stream_bf16"};
};

// Backward's scratch, shared by every layer.
struct LayerGradBuffers {
  NormOutputGrad dh;  // the gradient at each norm's output
  // bf16 compute: the residual stream's gradient rounded to bf16, written with it by every RMSNorm
  // backward (and the LM head's), read by the o and down projections' backward GEMMs.
  GrowingBufferBf16 dx_rounded{"residual_grad_bf16"};
  AttentionGradBuffers attention;
  MlpGradBuffers mlp;
};

// out = layer(x), rounded in bf16 compute like every activation kept for backward, unless the caller keeps
// it itself (out_kept: KeptActivation::keep rounds it as it keeps it, in one pass, or the next layer's
// keep_x does). keep_x: x is kept for backward by the layer's first norm as it reads it (model/linear.hpp). out may be x's own
// buffer: the residual stream is then updated in place, and x_mid is not kept unless a holds every
// layer's as bf16 (with fp32 buffers, in place means that no backward follows: forward-only runs,
// checkpointing's forward). An empty out rebuilds only what backward needs (checkpointing). A bf16 stream
// (Residual) is updated in place, in a holding every layer's activations as bf16, and is rounded already.
void decoder_layer_forward(const LayerWeights& w, const AttentionTokens& t, const Residual& x,
                           LayerActivations& a, const Residual& out, LayerStaging& s,
                           const LayerKvCache* cache = nullptr, bool out_kept = false,
                           const StreamKeep& keep_x = {});

// Checkpointing's rebuild of what backward reads (decoder_layer_forward with an empty out) from the
// layer's kept input. A bf16 input is widened straight into x_mid's buffer, where the attention block then
// adds its output in place: no fp32 copy of the input and no copy of it into x_mid.
void decoder_layer_recompute(const LayerWeights& w, const AttentionTokens& t, KeptActivation& input, Kept input_as,
                             LayerActivations& a, LayerStaging& s);

// dx holds d loss / d out on entry and d loss / d x on return, and in bf16 compute b.dx_rounded holds it
// rounded to bf16 on entry and on return; the weights' gradients are added into g.
void decoder_layer_backward(const LayerWeights& w, const LayerGrads& g, const AttentionTokens& t,
                            const GemmOperand& x, LayerActivations& a, Unmanaged2<float> dx, LayerGradBuffers& b,
                            LayerStaging& s);

}  // namespace shardft
