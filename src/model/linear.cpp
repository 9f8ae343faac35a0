#include "model/linear.hpp"

#include <stdexcept>
#include <string>

#include "kernels/bias.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/fp16.hpp"

namespace shardft {

namespace {
void check_bias(std::size_t bias, std::size_t out) {
  if (bias != 0 && bias != out) {
    throw std::invalid_argument("Linear: a bias of " + std::to_string(bias) + " entries for " + std::to_string(out) +
                                " outputs");
  }
}
}  // namespace

Linear::Linear(Unmanaged2<const float> weight, Unmanaged1<const float> bias, ComputeDtype dtype)
    : weight_(weight), bias_(bias), dtype_(dtype) {
  check_bias(bias.extent(0), weight.extent(0));
}

Linear::Linear(Unmanaged2<const bf16> weight, Unmanaged1<const float> bias)
    : weight_(weight), bias_(bias), dtype_(ComputeDtype::bf16) {
  check_bias(bias.extent(0), weight.extent(0));
}

void Linear::forward(Unmanaged2<float> x, Unmanaged2<float> y) const {
  round_activation(x, dtype_);
  forward(GemmOperand(Unmanaged2<const float>(x)), y);
}

void Linear::forward(const GemmOperand& x, Unmanaged2<float> y) const {
  gemm_mixed(Op::N, Op::T, 1.f, x, weight_, 0.f, y);
  if (bias_.extent(0) > 0) bias_forward(y, bias_);
}

void Linear::forward_add(const GemmOperand& x, Unmanaged2<float> y) const {
  gemm_mixed(Op::N, Op::T, 1.f, x, weight_, 1.f, y);
  if (bias_.extent(0) > 0) bias_forward(y, bias_);
}

void Linear::backward_weight(const GemmOperand& x, Unmanaged2<const float> dy, const LinearGrads& grads,
                             float dw_beta) const {
  gemm_mixed(Op::T, Op::N, 1.f, dy, x, dw_beta, grads.weight);
  if (bias_.extent(0) > 0) bias_backward(dy, grads.bias);
}

void Linear::backward_input(Unmanaged2<const float> dy, Unmanaged2<float> dx, float dx_beta) const {
  gemm_mixed(Op::N, Op::N, 1.f, dy, weight_, dx_beta, dx);
  if (dtype_ == ComputeDtype::fp16) round_to_fp16(flat(Unmanaged2<const float>(dx)), flat(dx));
}

void Linear::backward(const GemmOperand& x, Unmanaged2<const float> dy, Unmanaged2<float> dx, float dx_beta,
                      const LinearGrads& grads) const {
  backward_weight(x, dy, grads);
  backward_input(dy, dx, dx_beta);
}

Unmanaged2<float> LinearInput::staging(std::int64_t rows, std::int64_t cols, ComputeDtype dtype,
                                       GrowingBuffer& scratch) {
  return dtype == ComputeDtype::bf16 ? scratch.mat(rows, cols) : f32_.mat(rows, cols);
}

GemmOperand LinearInput::keep(Unmanaged2<float> staged, ComputeDtype dtype) {
  if (dtype == ComputeDtype::fp16) round_to_fp16(flat(Unmanaged2<const float>(staged)), flat(staged));
  if (dtype != ComputeDtype::bf16) return Unmanaged2<const float>(staged);
  const auto kept = bf16_.mat(staged.extent(0), staged.extent(1));
  to_bf16(flat(Unmanaged2<const float>(staged)), flat(kept));
  return Unmanaged2<const bf16>(kept);
}

GemmOperand LinearInput::kept(std::int64_t rows, std::int64_t cols, ComputeDtype dtype) {
  if (dtype != ComputeDtype::bf16) return Unmanaged2<const float>(f32_.mat(rows, cols));
  return Unmanaged2<const bf16>(bf16_.mat(rows, cols));
}

Unmanaged2<const float> LinearInput::values(std::int64_t rows, std::int64_t cols, ComputeDtype dtype,
                                            GrowingBuffer& scratch) {
  if (dtype != ComputeDtype::bf16) return f32_.mat(rows, cols);
  const auto out = scratch.mat(rows, cols);
  to_f32(flat(Unmanaged2<const bf16>(bf16_.mat(rows, cols))), flat(out));
  return out;
}

Unmanaged2<float> LinearInput::reusable(std::int64_t rows, std::int64_t cols, ComputeDtype dtype,
                                        GrowingBuffer& scratch) {
  return dtype == ComputeDtype::bf16 ? scratch.mat(rows, cols) : f32_.mat(rows, cols);
}

Kept kept_as(ComputeDtype dtype, bool every_layer) {
  if (dtype == ComputeDtype::fp16) return Kept::fp16_values;
  if (dtype != ComputeDtype::bf16) return Kept::fp32;
  return every_layer ? Kept::bf16 : Kept::bf16_values;
}

Unmanaged2<float> KeptActivation::staging(std::int64_t rows, std::int64_t cols, Kept how, GrowingBuffer& scratch,
                                          std::int64_t offset) {
  return how == Kept::bf16 ? scratch.mat_at(offset, rows, cols) : f32_.mat(rows, cols);
}

void KeptActivation::keep(Unmanaged2<float> staged, Kept how) {
  if (how == Kept::fp16_values) round_to_fp16(flat(Unmanaged2<const float>(staged)), flat(staged));
  if (how == Kept::bf16_values) round_to_bf16(flat(Unmanaged2<const float>(staged)), flat(staged));
  if (how == Kept::bf16) round_and_copy_to_bf16(flat(staged), flat(bf16_.mat(staged.extent(0), staged.extent(1))));
}

Unmanaged2<float> KeptActivation::values(std::int64_t rows, std::int64_t cols, Kept how, GrowingBuffer& scratch,
                                         std::int64_t offset) {
  if (how != Kept::bf16) return f32_.mat(rows, cols);
  const auto out = scratch.mat_at(offset, rows, cols);
  to_f32(flat(Unmanaged2<const bf16>(bf16_.mat(rows, cols))), flat(out));
  return out;
}

void round_activation(Unmanaged2<float> x, ComputeDtype dtype) {
  if (dtype == ComputeDtype::bf16) round_to_bf16(flat(Unmanaged2<const float>(x)), flat(x));
  if (dtype == ComputeDtype::fp16) round_to_fp16(flat(Unmanaged2<const float>(x)), flat(x));
}

Linear linear_of(ParamSource& params, const ParamLayout& layout, int weight, int bias, ComputeDtype dtype) {
  const Unmanaged1<const float> b = bias >= 0 ? params.weight(bias) : Unmanaged1<const float>();
  const Unmanaged2<const bf16> w16 = weight_matrix_bf16(params, layout, weight);
  if (w16.extent(0) > 0) return Linear(w16, b);
  return Linear(weight_matrix(params, layout, weight), b, dtype);
}

LinearGrads linear_grads_of(GradSink& grads, const ParamLayout& layout, int weight, int bias) {
  return {grad_matrix(grads, layout, weight), bias >= 0 ? grads.grad(bias) : Unmanaged1<float>()};
}

}  // namespace shardft
