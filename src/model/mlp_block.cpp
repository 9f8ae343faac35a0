#include "model/mlp_block.hpp"

#include <utility>

#include "kernels/elementwise.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/swiglu.hpp"
#include "kernels/swiglu_bf16.hpp"

namespace shardft {

namespace {

// [a; b] as one buffer: a view when b follows a in memory, else a copy into `copy`.
template <class T>
const T* fused_pair(Unmanaged1<const T> a, Unmanaged1<const T> b, GrowingBufferOf<T>& copy) {
  const std::int64_t n = static_cast<std::int64_t>(a.extent(0));
  if (b.data() == a.data() + n) return a.data();
  auto both = copy.vec(2 * n);
  Kokkos::deep_copy(ExecSpace(), Unmanaged1<T>(both.data(), n), a);
  Kokkos::deep_copy(ExecSpace(), Unmanaged1<T>(both.data() + n, n), b);
  return both.data();
}

// bf16 compute with every layer's activations kept as bf16 and a [gate; up] layer without bias: the GEMM
// writes gu in bf16 (LoRA's terms added there) and SwiGLU reads and writes bf16, so gu, s and [dg | du]
// never exist in fp32 (same values: each is the fp32 result rounded once, where the fp32-staged path
// rounds it on keep()). s is not kept:
// backward recomputes it from gu (kernels/swiglu_bf16.hpp) and writes [dg | du] over gu.
bool bf16_activations(const MlpWeights& w, const MlpActivations& a) {
  return w.down.dtype() == ComputeDtype::bf16 && kept_as(ComputeDtype::bf16, a.every_layer) == Kept::bf16 &&
         !w.gate_up.has_bias();
}

// One layer's s at a time (forward's, then backward's recompute): shared by the layers, not kept.
Unmanaged2<bf16> s_scratch(std::int64_t N, std::int64_t I) { return kernel_scratch<bf16>("mlp_s_bf16", N, I); }

// ds = d loss / d s as SwiGLU's backward reads it: rounded to bf16 once (autocast's gradient of the bf16
// s), by the GEMM itself where the down projection has no bias. Written into s's scratch, which SwiGLU's
// backward then fills with s again, pack by pack after reading ds there (one [tokens, I] buffer, not two).
Unmanaged2<bf16> down_input_grad_bf16(const Linear& down, const LinearGrad& dy, std::int64_t N, std::int64_t I) {
  const auto ds = s_scratch(N, I);
  if (dgrad_writes_bf16(down)) {
    down.backward_input_bf16(dy, ds);
  } else {
    const auto ds32 = kernel_scratch<float>("mlp_ds_f32", N, I);
    down.backward_input(dy, ds32, 0.f);
    to_bf16(flat(Unmanaged2<const float>(ds32)), flat(ds));
  }
  return ds;
}

// The down projection's backward and SwiGLU's: [dg | du] as the gate/up layer's backward GEMMs read it.
LinearGrad down_and_swiglu_backward(const MlpWeights& w, const MlpGrads& g, MlpActivations& a, const LinearGrad& dy,
                                    std::int64_t N, std::int64_t I, ActivationScratch& scratch) {
  const ComputeDtype dt = w.down.dtype();
  if (bf16_activations(w, a)) {
    const Unmanaged2<bf16> s = down_input_grad_bf16(w.down, dy, N, I);  // ds, until SwiGLU's backward
    const auto gu = a.gu.bf16_output(N, 2 * I);
    swiglu_backward_packed_bf16(gu, s, s);  // gu now holds [dg | du], s forward's s again
    w.down.backward_weight(Unmanaged2<const bf16>(s), dy, g.down, 1.f, &a.down_lora);
    return w.gate_up.with_lora_operands({Unmanaged2<const float>(), Unmanaged2<const bf16>(gu)}, "mlp_dgu_bf16");
  }
  // fp32: s's own buffer, read by dWd before dx is written
  const auto ds = a.s.reusable(N, I, dt, scratch.gemm_input);
  w.down.backward_weight(a.s.kept(N, I, dt), dy, g.down, 1.f, &a.down_lora);
  w.down.backward_input(dy, ds, 0.f);
  round_activation(ds, dt);  // bf16: as the path above rounds it
  const auto gu = a.gu.values(N, 2 * I, kept_as(dt, a.every_layer), scratch.kept);
  swiglu_backward_packed_inplace(gu, ds);  // gu now holds [dg | du]
  return w.gate_up.grad_operand(gu, "mlp_dgu_bf16");  // read by both halves of the fused layer's backward
}

}  // namespace

MlpWeights mlp_weights_of(ParamSource& params, const ParamLayout& layout, const LayerParams& P, float norm_eps,
                          ComputeDtype dtype, GateUpCopy& gate_up_copy) {
  const auto& shape = layout.params()[P.gate_proj].shape;
  const std::int64_t I = shape[0], d = shape[1];
  const NormWeight norm = norm_weight_of(params, P.post_attention_layernorm);
  const Linear down = linear_of(params, layout, P.down_proj, -1, dtype, P.lora_of(LoraModule::down_proj));
  const auto gate16 = params.weight_bf16(P.gate_proj);
  MlpWeights w{norm, norm_eps, {}, down};
  if (gate16.extent(0) > 0) {  // bf16 storage
    const auto up16 = params.weight_bf16(P.up_proj);
    w.gate_up = Linear(Unmanaged2<const bf16>(fused_pair(gate16, up16, gate_up_copy.b16), 2 * I, d), {});
  } else {
    const auto gate = params.weight(P.gate_proj), up = params.weight(P.up_proj);
    w.gate_up = Linear(Unmanaged2<const float>(fused_pair(gate, up, gate_up_copy.f32), 2 * I, d), {}, dtype);
  }
  // LoRA on gate_proj and up_proj: terms on the fused output's gate half and up half
  if (P.lora_of(LoraModule::gate_proj).on()) w.gate_up.add_lora(lora_term_of(params, layout, P.lora_of(LoraModule::gate_proj), 0));
  if (P.lora_of(LoraModule::up_proj).on()) w.gate_up.add_lora(lora_term_of(params, layout, P.lora_of(LoraModule::up_proj), I));
  return w;
}

MlpGrads mlp_grads_of(GradSink& grads, const ParamLayout& layout, const LayerParams& P) {
  MlpGrads g{grads.grad_to_write(P.post_attention_layernorm), grads.grad_to_write(P.gate_proj),
             grads.grad_to_write(P.up_proj), {},
             linear_grads_of(grads, layout, P.down_proj, -1, P.lora_of(LoraModule::down_proj))};
  int terms = 0;
  for (LoraModule m : {LoraModule::gate_proj, LoraModule::up_proj}) {
    if (P.lora_of(m).on()) g.gate_up_lora[terms++] = lora_grads_of(grads, layout, P.lora_of(m));
  }
  return g;
}

void mlp_block_forward(const MlpWeights& w, const Residual& x, MlpActivations& a, const Residual& out,
                       ActivationScratch& scratch, const StreamKeep& keep_x) {
  const std::int64_t N = x.rows(), I = w.down.in_features();
  const ComputeDtype dt = w.down.dtype();
  const Kept how = kept_as(dt, a.every_layer);
  const GemmOperand h = a.h.keep_rmsnorm(keep_x, x, w.norm, w.norm_eps, a.rstd.vec(N), dt, scratch.gemm_input);
  GemmOperand s = Unmanaged2<const float>();  // the down projection's input (kept, or recomputed by backward)
  if (bf16_activations(w, a)) {
    const auto gu = a.gu.bf16_output(N, 2 * I);
    w.gate_up.forward_bf16(h, gu, &a.gate_up_lora);
    if (out.empty()) return;  // a rebuild for backward, which recomputes s from the kept gu itself
    const auto s16 = s_scratch(N, I);
    swiglu_forward_packed_bf16(gu, s16);
    s = Unmanaged2<const bf16>(s16);
  } else {
    const auto gu = a.gu.staging(N, 2 * I, how, scratch.kept);
    w.gate_up.forward(h, gu, &a.gate_up_lora);
    a.gu.keep(gu, how);
    const auto s_staged = a.s.staging(N, I, dt, scratch.gemm_input);  // h is kept: the staging is free again
    swiglu_forward_packed(gu, s_staged);
    s = a.s.keep(s_staged, dt);
  }
  if (out.empty()) return;
  copy_stream(x, out);
  w.down.forward_add(s, out, &a.down_lora);
}

void mlp_block_backward(const MlpWeights& w, const MlpGrads& g, const GemmOperand& x, MlpActivations& a,
                        Unmanaged2<float> dx, Unmanaged2<bf16> dx_rounded, NormOutputGrad& dh, MlpGradBuffers& b,
                        ActivationScratch& scratch) {
  const std::int64_t N = x.extent(0), d = x.extent(1), I = w.down.in_features();
  const ComputeDtype dt = w.down.dtype();
  const GemmOperand h = a.h.kept(N, d, dt);
  const LinearGrad dy = w.down.grad_operand(dx, dx_rounded, "mlp_down_dy_bf16");
  const LinearGrad dgu = down_and_swiglu_backward(w, g, a, dy, N, I, scratch);
  const GemmOperand dh_values = norm_output_grad(w.gate_up, dgu, dh);
  LinearGrads gate_up_grads{{}, {}, {g.gate_up_lora[0], g.gate_up_lora[1]}};
  const Unmanaged1<float> gate = g.gate.values, up = g.up.values;
  if (gate.extent(0) == 0) {  // frozen (LoRA): only the LoRA terms' gradients
    w.gate_up.backward_weight(h, dgu, gate_up_grads, 1.f, &a.gate_up_lora);
  } else if (up.data() == gate.data() + I * d && g.gate.overwrite == g.up.overwrite) {
    gate_up_grads.weight = Unmanaged2<float>(gate.data(), 2 * I, d);
    gate_up_grads.overwrite_weight = g.gate.overwrite;
    w.gate_up.backward_weight(h, dgu, gate_up_grads, 1.f, &a.gate_up_lora);
  } else {
    auto dw = b.gate_up_dw.mat(2 * I, d);
    gate_up_grads.weight = dw;
    w.gate_up.backward_weight(h, dgu, gate_up_grads, 0.f, &a.gate_up_lora);
    const std::pair<const GradWrite*, std::int64_t> halves[] = {{&g.gate, 0}, {&g.up, I * d}};
    for (const auto& [half, at] : halves) {
      const Unmanaged1<const float> part(dw.data() + at, I * d);
      if (half->overwrite) {
        Kokkos::deep_copy(ExecSpace(), half->values, part);
      } else {
        add_inplace(half->values, part);
      }
    }
  }
  rmsnorm_backward_kept(x, w.norm, a.rstd.vec(N), dh_values, dx, g.norm, dx_rounded);
}

}  // namespace shardft
