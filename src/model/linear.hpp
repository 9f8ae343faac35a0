#pragma once
// A linear layer y = x W^T (+ b), W [out, in] row-major as HF stores it: every matmul of the decoder
// with a weight goes through it, and so does the compute dtype.
//
// bf16 compute: the weights arrive rounded (ParamSource), as bf16 storage where the source keeps them so
// (the sharding engine: half the bytes) or as bf16 values in fp32 buffers, and a linear layer rounds its
// input in place before the GEMM. In place, because backward's dW = dy^T x must see the x forward
// multiplied; rounding is idempotent, so layers sharing one input (q, k, v) each round it and get the
// same values. Every GEMM accumulates in fp32 (kernels/gemm.hpp). This is the only place the model
// rounds to bf16.
#include "kernels/gemm.hpp"
#include "kernels/types.hpp"
#include "model/param_layout.hpp"
#include "model/param_source.hpp"

namespace shardft {

enum class ComputeDtype { fp32, bf16 };

// Where a linear layer's gradients are added.
struct LinearGrads {
  Unmanaged2<float> weight;  // [out, in]
  Unmanaged1<float> bias;    // [out]; empty when the layer has no bias
};

class Linear {
 public:
  Linear() = default;
  // bias empty: no bias. Throws std::invalid_argument when the bias does not have `out` entries.
  Linear(Unmanaged2<const float> weight, Unmanaged1<const float> bias, ComputeDtype dtype);
  // bf16 weights as the source stores them (bf16 compute): the GEMMs read them without an fp32 copy.
  Linear(Unmanaged2<const bf16> weight, Unmanaged1<const float> bias);

  // y = x W^T + b
  void forward(Unmanaged2<float> x, Unmanaged2<float> y) const;
  // y += x W^T + b: a residual branch added into the stream
  void forward_add(Unmanaged2<float> x, Unmanaged2<float> y) const;
  // x as the GEMM sees it (bf16 values in bf16 mode), for a recompute that keeps x for backward but
  // skips the product.
  void round_input(Unmanaged2<float> x) const;

  // dW += dy^T x and db += sum_n dy, then dx = dy W + dx_beta dx. Weights first, so dx may be x's
  // own buffer (the MLP writes ds over s).
  void backward(Unmanaged2<const float> x, Unmanaged2<const float> dy, Unmanaged2<float> dx, float dx_beta,
                const LinearGrads& grads) const;
  // The two halves of backward: dW = dw_beta dW + dy^T x (and db += sum_n dy); dx = dy W + dx_beta dx.
  void backward_weight(Unmanaged2<const float> x, Unmanaged2<const float> dy, const LinearGrads& grads,
                       float dw_beta = 1.f) const;
  void backward_input(Unmanaged2<const float> dy, Unmanaged2<float> dx, float dx_beta) const;

  std::int64_t out_features() const { return static_cast<std::int64_t>(weight_.extent(0)); }
  std::int64_t in_features() const { return static_cast<std::int64_t>(weight_.extent(1)); }

 private:
  GemmOperand weight_{Unmanaged2<const float>()};
  Unmanaged1<const float> bias_;
  ComputeDtype dtype_ = ComputeDtype::fp32;
};

// The linear layer of parameter `weight` (and `bias`, -1: none) of an acquired block, and where its
// gradients go.
Linear linear_of(ParamSource& params, const ParamLayout& layout, int weight, int bias, ComputeDtype dtype);
LinearGrads linear_grads_of(GradSink& grads, const ParamLayout& layout, int weight, int bias);

}  // namespace shardft
