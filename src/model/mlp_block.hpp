#pragma once
// The MLP half of a decoder layer (HF LlamaMLP, SwiGLU, with its pre-norm and residual):
//   h = RMSNorm(x);  [g | u] = h [Wg; Wu]^T;  s = silu(g) * u;  out = x + s Wd^T
// The gate and up projections run as one GEMM on their [2I, d] concatenation (kernels/swiglu.hpp's
// packed layout), and backward writes each gradient over the activation it came from, so the MLP needs
// no [tokens, I] buffers beyond gu and s.
#include "model/growing_buffer.hpp"
#include "model/linear.hpp"
#include "model/param_layout.hpp"
#include "model/param_source.hpp"

namespace shardft {

struct MlpWeights {
  NormWeight norm;  // post_attention_layernorm
  float norm_eps = 0.f;
  Linear gate_up, down;
};

struct MlpGrads {
  GradWrite norm;  // the post-attention norm's weight
  GradWrite gate, up;  // [I * d] each; the fused weight's gradient goes into both (empty: frozen)
  LoraGrads gate_up_lora[kMaxLoraTerms];  // the fused layer's LoRA terms (gate's, then up's), as added
  LinearGrads down;
};

// What forward keeps for backward; h and s are GEMM inputs, bf16 in bf16 compute. gu, which SwiGLU's
// backward reads again, is kept_as(dtype, every_layer). With every layer's gu kept as bf16 (and a [gate; up]
// layer without bias) s is not kept: backward recomputes it from gu and writes [dg | du] over gu.
struct MlpActivations {
  bool every_layer = false;  // one of every layer's, kept together until backward (model/linear.hpp Kept)
  LinearInput h{"mlp_h"}, s{"s"};
  KeptActivation gu{"gu"};
  LoraKept gate_up_lora{"gate_up_lora_u"}, down_lora{"down_lora_u"};  // their LoRA terms' u
  GrowingBuffer rstd{"mlp_rstd"};
};

// Backward's scratch: the [gate; up] gradient, used only when the two gradients are not adjacent.
struct MlpGradBuffers {
  GrowingBuffer gate_up_dw{"gate_up_dw"};
};

// Where [Wg; Wu] is copied when the two are not adjacent, in the storage the ParamSource holds.
struct GateUpCopy {
  GrowingBuffer f32{"gate_up_copy"};
  GrowingBufferBf16 b16{"gate_up_copy_bf16"};
};

// The MLP of layer P of an acquired block. The gate and up weights are adjacent in the layout (and in
// every unit of the sharding engine), so [Wg; Wu] is normally a view; otherwise it is copied into
// `gate_up_copy`.
MlpWeights mlp_weights_of(ParamSource& params, const ParamLayout& layout, const LayerParams& P, float norm_eps,
                          ComputeDtype dtype, GateUpCopy& gate_up_copy);
MlpGrads mlp_grads_of(GradSink& grads, const ParamLayout& layout, const LayerParams& P);

// out = x + MLP(RMSNorm(x)); out may be x's own buffer (x and out both fp32 or both bf16). An empty out
// (recomputing for backward) stops before the down projection, whose output backward does not need.
// scratch: shared by the layers, here and in backward. keep_x: x is kept for backward first, by the norm
// (model/linear.hpp).
void mlp_block_forward(const MlpWeights& w, const Residual& x, MlpActivations& a, const Residual& out,
                       ActivationScratch& scratch, const StreamKeep& keep_x = {});

// dx holds d loss / d out on entry and d loss / d x on return; the weights' gradients are added into g.
// gu's fp32 values are overwritten by its gradient, and ds goes over s (fp32) or into scratch (bf16). dh:
// scratch for the gradient at the norm's output (model/linear.hpp).
// dx_rounded (bf16 compute; empty otherwise): dx rounded to bf16, on entry and on return.
void mlp_block_backward(const MlpWeights& w, const MlpGrads& g, const GemmOperand& x, MlpActivations& a,
                        Unmanaged2<float> dx, Unmanaged2<bf16> dx_rounded, NormOutputGrad& dh, MlpGradBuffers& b,
                        ActivationScratch& scratch);

}  // namespace shardft
