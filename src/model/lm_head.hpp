#pragma once
// The model's end (HF LlamaForCausalLM after the layers): final RMSNorm, LM head, cross-entropy,
//   h = RMSNorm(x);  logits = h W^T;  loss = sum over target tokens of CE(logits, target)
// The loss runs chunk tokens at a time (0: all at once): only a [chunk, vocab] slice of logits ever
// exists, and in training it is turned into its gradient in place and consumed at once.
#include <cstdint>

#include "config/model_config.hpp"
#include "kernels/cross_entropy.hpp"
#include "model/growing_buffer.hpp"
#include "model/linear.hpp"

namespace shardft {

struct HeadWeights {
  NormWeight norm;
  float norm_eps = 0.f;
  Linear lm_head;
};

struct HeadGrads {
  GradWrite norm;  // the final norm's weight
  LinearGrads lm_head;
};

// The head block's weights (acquired) and where its gradients go; with tied embeddings the LM head is
// the embedding matrix, and its gradient the embedding's.
HeadWeights head_weights_of(ParamSource& params, const ParamLayout& layout, const ModelConfig& cfg, ComputeDtype dtype);
HeadGrads head_grads_of(GradSink& grads, const ParamLayout& layout);

struct HeadBuffers {
  GrowingBuffer h{"head_h"}, rstd{"head_rstd"}, picked{"head_picked"}, logits{"logits"};
  GrowingBufferBf16 h16{"head_h_bf16"};  // bf16 compute: the final norm's output as the head's GEMMs read it
  GrowingBufferBf16 logits16{"logits_bf16"};  // bf16 compute: a chunk's logits, then their gradient
  GrowingBufferOf<double> loss{"head_loss_sum"};  // one call's loss sum, on the device
};

// logits [R, vocab] at the R tokens `rows` of x (flat indices; empty: every token, R = x's rows).
void head_logits(const HeadWeights& w, Unmanaged2<const float> x, Unmanaged1<const std::int32_t> rows,
                 HeadBuffers& b, Unmanaged2<float> logits);

// The summed cross-entropy over x's targets (-100 takes none), read back to the host.
CrossEntropySums head_loss(const HeadWeights& w, Unmanaged2<const float> x, Unmanaged1<const std::int32_t> targets,
                           std::int64_t chunk, HeadBuffers& b);

// The same loss, added into loss_sum(0) on the device (nothing is read back), and the backward of
// grad_scale * loss: the weights' gradients added into g, dx overwritten by d (grad_scale * loss) / d x,
// and a non-empty dx_rounded by dx rounded to bf16. dh: scratch for the gradient at the final norm's
// output (model/linear.hpp). x: the last layer's
// output, fp32 (rounded by that layer in the compute dtype) or a bf16 step's bf16 stream.
void head_loss_backward(const HeadWeights& w, const HeadGrads& g, const Residual& x,
                        Unmanaged1<const std::int32_t> targets, std::int64_t chunk, float grad_scale, HeadBuffers& b,
                        NormOutputGrad& dh, Unmanaged2<float> dx, Unmanaged2<bf16> dx_rounded,
                        Unmanaged1<double> loss_sum);

}  // namespace shardft
