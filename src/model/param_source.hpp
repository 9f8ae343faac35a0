#pragma once
// How the model reaches its weights and hands back its gradients, block by block, without knowing
// where they live. The sharding engine (parallel/) implements both with gathers and reductions;
// LocalParams is the single-rank implementation: everything resident, nothing to communicate.
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"
#include "model/param_layout.hpp"

namespace shardft {

// The pass that reads a block's weights, told by the model at every acquire and release: a sharded
// source prefetches up the layers in forward and down them in backward, and hpZ keeps a node-local copy
// in forward for backward's gathers. The LM head computes its loss and the loss's gradient in one turn:
// a training step acquires it for backward (the pass it starts), a forward-only pass for forward.
enum class Pass { forward, backward };

class ParamSource {
 public:
  virtual ~ParamSource() = default;
  // Makes the weights of `block` readable until release(block, pass); may communicate.
  virtual void acquire(int block, Pass pass) = 0;
  // A parameter of an acquired block, in compute precision (bf16-rounded values in bf16 mode), as fp32.
  virtual Unmanaged1<const float> weight(int param) = 0;
  // The same parameter as bf16 storage, where the source keeps its compute weights as bf16 (the sharding
  // engine with bf16 compute: half the bytes); empty where it keeps them as fp32. Where it is set the
  // model reads its matrices and its layer and final norm weights here (model/linear.hpp norm_weight_of),
  // and weight() only for biases and Qwen3's per-head q/k norms (a bf16 source widens those into an fp32
  // copy).
  virtual Unmanaged1<const bf16> weight_bf16(int /*param*/) { return {}; }
  virtual void release(int block, Pass pass) = 0;
};

// A gradient buffer the model may write instead of adding into (GradSink::grad_to_write): `overwrite`
// where nothing of this micro-batch's sum has reached it yet, so that its values are stale and the
// model's first contribution replaces them (a GEMM's beta 0) instead of adding to zeros.
struct GradWrite {
  Unmanaged1<float> values;
  bool overwrite = false;
};

class GradSink {
 public:
  virtual ~GradSink() = default;
  // The fp32 buffer the model ADDS this parameter's gradient into; empty for a frozen parameter
  // (ParamSpec::frozen), whose gradient the model then does not compute.
  virtual Unmanaged1<float> grad(int param) = 0;
  // The same buffer for a caller that will write the parameter's whole gradient in this micro-batch
  // (a weight's dW = dy^T x, a norm weight's column sums): where `overwrite` is set it must write
  // every element, not add. A sink that zeroes its buffers before each sum says false (the default).
  virtual GradWrite grad_to_write(int param) { return {grad(param), false}; }
  // Every gradient contribution of `block` for this micro-batch has been added.
  virtual void block_done(int block) = 0;
};

// A parameter of an acquired block as its row-major matrix (a weight [out, in], the embedding
// [vocab, hidden]), and its gradient buffer the same way.
Unmanaged2<const float> weight_matrix(ParamSource& params, const ParamLayout& layout, int param);
// The same as bf16 storage; empty where the source keeps fp32 (ParamSource::weight_bf16).
Unmanaged2<const bf16> weight_matrix_bf16(ParamSource& params, const ParamLayout& layout, int param);
Unmanaged2<float> grad_matrix(GradSink& grads, const ParamLayout& layout, int param);
// grad_to_write's buffer as that matrix; `overwrite` as grad_to_write says.
Unmanaged2<float> grad_matrix_to_write(GradSink& grads, const ParamLayout& layout, int param, bool* overwrite);

// Single rank: one flat fp32 buffer of weights and one of gradients, in layout order (a frozen
// parameter's gradient is left at zero: grad() gives it no buffer).
class LocalParams : public ParamSource, public GradSink {
 public:
  explicit LocalParams(const ParamLayout& layout);

  void acquire(int, Pass) override {}
  Unmanaged1<const float> weight(int param) override;
  void release(int, Pass) override {}
  Unmanaged1<float> grad(int param) override;
  void block_done(int) override {}

  View1<float> weights() const { return weights_; }
  View1<float> grads() const { return grads_; }
  const ParamLayout& layout() const { return layout_; }

 private:
  const ParamLayout& layout_;
  View1<float> weights_;
  View1<float> grads_;
};

}  // namespace shardft
