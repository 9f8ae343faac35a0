#include "model/lm_head.hpp"

#include <algorithm>

#include "kernels/elementwise.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rows.hpp"

namespace shardft {

namespace {

// A GEMM input made in fp32 as the LM head reads it: bf16 compute rounds it once into a bf16 buffer, so
// the head's GEMMs are bf16 x bf16 and the [vocab, hidden] table is never widened; fp16 rounds it in place.
GemmOperand head_input(Unmanaged2<float> x, ComputeDtype dtype, GrowingBufferBf16& b16) {
  if (dtype != ComputeDtype::bf16) {
    round_activation(x, dtype);
    return Unmanaged2<const float>(x);
  }
  const auto rounded = b16.mat(x.extent(0), x.extent(1));
  to_bf16(flat(Unmanaged2<const float>(x)), flat(rounded));
  return Unmanaged2<const bf16>(rounded);
}

// Rows [r0, r0 + rows) of a row-major GEMM operand.
GemmOperand row_block(const GemmOperand& x, std::int64_t r0, std::int64_t rows) {
  const std::int64_t cols = static_cast<std::int64_t>(x.extent(1));
  if (x.is_bf16) return Unmanaged2<const bf16>(x.b16.data() + r0 * cols, rows, cols);
  return Unmanaged2<const float>(x.f32.data() + r0 * cols, rows, cols);
}

// h = RMSNorm(x) in fp32, as the head's GEMM inputs are made from it.
Unmanaged2<float> normed(const HeadWeights& w, Unmanaged2<const float> x, HeadBuffers& b) {
  const std::int64_t N = x.extent(0);
  auto h = b.h.mat(N, x.extent(1));
  rmsnorm_forward(x, w.norm, w.norm_eps, h, b.rstd.vec(N));
  return h;
}

// h as the head's GEMMs read it; in bf16 compute the norm writes it in bf16 itself (the same values as
// normed() rounded, without an fp32 [tokens, hidden] copy or a rounding pass).
GemmOperand final_norm(const HeadWeights& w, Unmanaged2<const float> x, HeadBuffers& b) {
  if (w.lm_head.dtype() != ComputeDtype::bf16) return head_input(normed(w, x, b), w.lm_head.dtype(), b.h16);
  const std::int64_t N = x.extent(0);
  const auto h = b.h16.mat(N, x.extent(1));
  rmsnorm_forward(x, w.norm, w.norm_eps, h, b.rstd.vec(N));
  return Unmanaged2<const bf16>(h);
}

// final_norm for a step's loss. A bf16 stream (a bf16 step's) was rounded by the GEMM that wrote it: the
// norm reads it as it is and writes its bf16 output.
GemmOperand stream_final_norm(const HeadWeights& w, const Residual& x, HeadBuffers& b) {
  if (!x.is_bf16) return final_norm(w, x.f32, b);
  const std::int64_t N = x.rows();
  const auto h = b.h16.mat(N, x.cols());
  rmsnorm_forward_keeping(Unmanaged2<const bf16>(x.b16), Unmanaged2<bf16>(), w.norm, w.norm_eps, h, b.rstd.vec(N));
  return Unmanaged2<const bf16>(h);
}

// One chunk in bf16 compute with a plain head: the GEMM writes the logits in bf16 (autocast's lm_head
// output, which HF's loss reads widened), cross-entropy turns them into their bf16 gradient in place,
// and the head's backward GEMMs read that: the [rows, vocab] block never exists in fp32.
void chunk_loss_bf16(const HeadWeights& w, const HeadGrads* grads, const GemmOperand& h_c,
                     Unmanaged1<const std::int32_t> targets_c, float grad_scale, HeadBuffers& b, Unmanaged2<bf16> dh_c,
                     Unmanaged1<double> sum) {
  const auto logits = b.logits16.mat(h_c.extent(0), w.lm_head.out_features());
  w.lm_head.forward_bf16(h_c, logits);
  if (!grads) {
    cross_entropy_forward(Unmanaged2<const bf16>(logits), targets_c, sum);
    return;
  }
  cross_entropy_forward_backward(logits, targets_c, grad_scale, sum);
  const LinearGrad dlogits{Unmanaged2<const float>(), Unmanaged2<const bf16>(logits)};
  w.lm_head.backward_weight(h_c, dlogits, grads->lm_head);
  w.lm_head.backward_input_bf16(dlogits, dh_c);
}

// The loss chunk by chunk, summed on the device into b.loss (returned); with grads, each chunk's logits
// become their gradient and flow back into dh (bf16 where the head's dgrad writes bf16, dgrad_writes_bf16:
// then the bf16 chunks below, else fp32). The head's weight gradient sums the chunks: where its buffer is
// to be overwritten, the first chunk writes it and the others add.
Unmanaged1<double> chunked_loss(const HeadWeights& w, const HeadGrads* head_grads, const GemmOperand& h,
                                Unmanaged1<const std::int32_t> targets, std::int64_t chunk, float grad_scale,
                                HeadBuffers& b, Unmanaged2<float> dh, Unmanaged2<bf16> dh16) {
  const std::int64_t N = h.extent(0), d = h.extent(1), V = w.lm_head.out_features();
  HeadGrads chunk_grads = head_grads ? *head_grads : HeadGrads{};
  const HeadGrads* grads = head_grads ? &chunk_grads : nullptr;
  if (grads && N == 0 && chunk_grads.lm_head.overwrite_weight) {
    Kokkos::deep_copy(ExecSpace(), flat(chunk_grads.lm_head.weight), 0.f);  // no rows: a zero gradient
  }
  const std::int64_t per_chunk = chunk > 0 ? std::min(chunk, N) : N;
  const auto sum = b.loss.vec(1);
  Kokkos::deep_copy(ExecSpace(), sum, 0.0);
  for (std::int64_t c0 = 0; c0 < N; c0 += per_chunk) {
    const std::int64_t rows = std::min(per_chunk, N - c0);
    const GemmOperand h_c = row_block(h, c0, rows);
    const Unmanaged1<const std::int32_t> targets_c(targets.data() + c0, rows);
    if (h.is_bf16 && dgrad_writes_bf16(w.lm_head)) {
      const Unmanaged2<bf16> dh_c = grads ? Unmanaged2<bf16>(dh16.data() + c0 * d, rows, d) : Unmanaged2<bf16>();
      chunk_loss_bf16(w, grads, h_c, targets_c, grad_scale, b, dh_c, sum);
      chunk_grads.lm_head.overwrite_weight = false;
      continue;
    }
    const auto logits = b.logits.mat(rows, V);
    w.lm_head.forward(h_c, logits);
    if (!grads) {
      cross_entropy_forward(logits, targets_c, sum);
      continue;
    }
    cross_entropy_forward_backward(logits, targets_c, grad_scale, sum);
    w.lm_head.backward(h_c, logits, Unmanaged2<float>(dh.data() + c0 * d, rows, d), 0.f, grads->lm_head);
    chunk_grads.lm_head.overwrite_weight = false;
  }
  return sum;
}

}  // namespace

HeadWeights head_weights_of(ParamSource& params, const ParamLayout& layout, const ModelConfig& cfg,
                            ComputeDtype dtype) {
  return {norm_weight_of(params, layout.final_norm()), static_cast<float>(cfg.rms_norm_eps),
          linear_of(params, layout, layout.lm_head(), -1, dtype)};
}

HeadGrads head_grads_of(GradSink& grads, const ParamLayout& layout) {
  return {grads.grad_to_write(layout.final_norm()), linear_grads_of(grads, layout, layout.lm_head(), -1)};
}

void head_logits(const HeadWeights& w, Unmanaged2<const float> x, Unmanaged1<const std::int32_t> rows,
                 HeadBuffers& b, Unmanaged2<float> logits) {
  if (rows.extent(0) == 0) {
    w.lm_head.forward(final_norm(w, x, b), logits);
    return;
  }
  const auto picked = b.picked.mat(rows.extent(0), x.extent(1));
  gather_rows(normed(w, x, b), rows, picked);
  w.lm_head.forward(head_input(picked, w.lm_head.dtype(), b.h16), logits);
}

CrossEntropySums head_loss(const HeadWeights& w, Unmanaged2<const float> x, Unmanaged1<const std::int32_t> targets,
                           std::int64_t chunk, HeadBuffers& b) {
  const auto sum = chunked_loss(w, nullptr, final_norm(w, x, b), targets, chunk, 0.f, b, {}, {});
  CrossEntropySums sums;
  sums.loss_sum = read_scalar(sum, "evaluation loss");
  sums.count = cross_entropy_target_count(targets);
  return sums;
}

void head_loss_backward(const HeadWeights& w, const HeadGrads& g, const Residual& x,
                        Unmanaged1<const std::int32_t> targets, std::int64_t chunk, float grad_scale, HeadBuffers& b,
                        NormOutputGrad& dh, Unmanaged2<float> dx, Unmanaged2<bf16> dx_rounded,
                        Unmanaged1<double> loss_sum) {
  const GemmOperand h = stream_final_norm(w, x, b);
  const std::int64_t N = x.rows(), d = x.cols();
  // The chunks' dgrads write dh in bf16 where h is bf16 and the head plain (chunked_loss), else in fp32.
  const bool bf16_dh = h.is_bf16 && dgrad_writes_bf16(w.lm_head);
  const Unmanaged2<float> dh32 = bf16_dh ? Unmanaged2<float>() : dh.f32.mat(N, d);
  const Unmanaged2<bf16> dh16 = bf16_dh ? dh.b16.mat(N, d) : Unmanaged2<bf16>();
  add_scalar(loss_sum, chunked_loss(w, &g, h, targets, chunk, grad_scale, b, dh32, dh16));
  Kokkos::deep_copy(ExecSpace(), dx, 0.f);
  const GemmOperand x_kept =
      x.is_bf16 ? GemmOperand(Unmanaged2<const bf16>(x.b16)) : GemmOperand(Unmanaged2<const float>(x.f32));
  const GemmOperand dy =
      bf16_dh ? GemmOperand(Unmanaged2<const bf16>(dh16)) : GemmOperand(Unmanaged2<const float>(dh32));
  rmsnorm_backward_kept(x_kept, w.norm, b.rstd.vec(N), dy, dx, g.norm, dx_rounded);
}

}  // namespace shardft
