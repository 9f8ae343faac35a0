#include "model/attention_block.hpp"

#include "kernels/attention_lse.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rows.hpp"

namespace shardft {

namespace {

// One log-sum-exp (or backward's D) per query row and head.
std::int64_t rows_times_heads(const AttentionShape& s) { return static_cast<std::int64_t>(s.batch) * s.heads * s.seq; }

// o = attention(q, k, v): over the step's own tokens (training and prefill, the same kernel, so prompts
// attend exactly as in a full forward), or, decoding, over each query's cache row.
void attend(const AttentionTokens& t, Unmanaged2<const float> q, Unmanaged2<const float> k, Unmanaged2<const float> v,
            AttentionActivations& a, Unmanaged2<float> o, const LayerKvCache* cache) {
  if (cache != nullptr && cache->reads != nullptr) {
    const KvCacheReads& r = *cache->reads;
    attention_decode(r.shape, q, cache->k, cache->v, r.slot, r.len, o, a.probs.vec(r.shape.scores_size()));
  } else if (t.memory_efficient) {
    attention_forward_lse(t.shape, q, k, v, t.seq_ids, o, a.lse.vec(rows_times_heads(t.shape)));
  } else {
    attention_forward(t.shape, q, k, v, t.seq_ids, o, a.probs.vec(t.shape.probs_size()));
  }
}

struct Qkv {
  Unmanaged2<float> q, k, v;
  Unmanaged2<float> q_proj, k_proj;  // qk_norm: q and k before their norms; else empty
};

// Where forward writes q, k, v and, with qk_norm, the projections before the norms (widen: backward's
// copies of them, as forward kept them): their own buffers, or, held as bf16, side by side in the shared
// scratch.
Qkv qkv_of(AttentionActivations& a, std::int64_t N, std::int64_t qd, std::int64_t kvd, bool qk_norm, Kept how,
           GrowingBuffer& scratch, bool widen) {
  if (how == Kept::bf16) scratch.reserve(N * (qd + 2 * kvd + (qk_norm ? qd + kvd : 0)));  // the views stay put
  const auto at = [&](KeptActivation& x, std::int64_t cols, std::int64_t offset) {
    return widen ? x.values(N, cols, how, scratch, offset) : x.staging(N, cols, how, scratch, offset);
  };
  Qkv out{at(a.q, qd, 0), at(a.k, kvd, N * qd), at(a.v, kvd, N * (qd + kvd)), {}, {}};
  if (qk_norm) {
    out.q_proj = at(a.q_proj, qd, N * (qd + 2 * kvd));
    out.k_proj = at(a.k_proj, kvd, N * (2 * qd + 2 * kvd));
  }
  return out;
}

// The bf16 q, k or v the fused kernels read: the kept copy (Kept::bf16), else its fp32 values (already
// rounded to bf16: the conversion is exact) copied into scratch.
Unmanaged2<const bf16> bf16_input(KeptActivation& kept, Unmanaged2<const float> values, Kept how, std::int64_t rows,
                                  std::int64_t cols, const char* scratch_name) {
  if (how == Kept::bf16) return kept.kept_bf16(rows, cols);
  const auto copy = kernel_scratch<bf16>(scratch_name, rows, cols);
  to_bf16(flat(values), flat(copy));
  return copy;
}

// o = attention(q, k, v) on the fused kernels, written in bf16 straight into o's kept GEMM input; the
// softmax statistics go into a.lse for backward.
void attend_fused(const AttentionTokens& t, const Qkv& qkv, AttentionActivations& a, Kept how, std::int64_t qd,
                  std::int64_t kvd) {
  const std::int64_t N = t.num_tokens();
  fused_attention_forward(t.shape, t.segments, bf16_input(a.q, qkv.q, how, N, qd, "attn_q_bf16"),
                          bf16_input(a.k, qkv.k, how, N, kvd, "attn_k_bf16"),
                          bf16_input(a.v, qkv.v, how, N, kvd, "attn_v_bf16"), a.o.bf16_output(N, qd),
                          a.lse.vec(fused_attention_stats_size(t.shape, t.segments)));
}

// dq, dk, dv from dattn = d loss / d o on the fused kernels: dattn rounded to bf16 once (autocast's
// gradient of a bf16 tensor), the kernels' bf16 gradients widened into the fp32 buffers RoPE's backward
// and the projections' backward read.
void attend_fused_backward(const AttentionTokens& t, const Qkv& qkv, AttentionActivations& a, Kept how,
                           Unmanaged2<const float> dattn, Unmanaged2<float> dq, Unmanaged2<float> dk,
                           Unmanaged2<float> dv) {
  const std::int64_t N = t.num_tokens(), qd = dq.extent(1), kvd = dk.extent(1);
  const auto dout = kernel_scratch<bf16>("attn_dout_bf16", N, qd);
  to_bf16(flat(dattn), flat(dout));
  const auto dq16 = kernel_scratch<bf16>("attn_dq_bf16", N, qd);
  const auto dk16 = kernel_scratch<bf16>("attn_dk_bf16", N, kvd), dv16 = kernel_scratch<bf16>("attn_dv_bf16", N, kvd);
  fused_attention_backward(t.shape, t.segments, bf16_input(a.q, qkv.q, how, N, qd, "attn_q_bf16"),
                           bf16_input(a.k, qkv.k, how, N, kvd, "attn_k_bf16"),
                           bf16_input(a.v, qkv.v, how, N, kvd, "attn_v_bf16"), a.o.bf16_output(N, qd), dout,
                           a.lse.vec(fused_attention_stats_size(t.shape, t.segments)), dq16, dk16, dv16);
  to_f32(flat(Unmanaged2<const bf16>(dq16)), flat(dq));
  to_f32(flat(Unmanaged2<const bf16>(dk16)), flat(dk));
  to_f32(flat(Unmanaged2<const bf16>(dv16)), flat(dv));
}

// x [tokens, heads * hd] as [tokens * heads, hd]: one row per token and head, for the per-head norms.
template <class T>
Unmanaged2<T> head_rows(Unmanaged2<T> x, std::int64_t hd) {
  return Unmanaged2<T>(x.data(), static_cast<std::int64_t>(x.extent(0)) * x.extent(1) / hd, hd);
}


// bf16 compute with every layer's activations kept as bf16, stacked q/k/v projections and the
// memory-efficient kernels, or the fused ones where they read column blocks: one GEMM writes [q | k | v]
// in bf16 straight into its kept buffer, RoPE rotates q and k there, and the attention kernels read q, k
// and v as its column blocks, so they never exist in fp32 on the fused path (the CPU kernels read them
// widened a block at a time). Backward likewise: the attention kernels write [dq | dk | dv] in bf16, RoPE
// rotates dq and dk back in place, and one GEMM each gives the projections' input and weight gradients.
// The staged path rounds at the same points (project_qkv, attention_grads) and stacks the same backward
// GEMMs, so both give the same bits.
bool packed_qkv(const AttentionWeights& w, Kept how, const AttentionTokens& t) {
  return how == Kept::bf16 && w.qkv_stacked && (t.fused ? t.fused_column_blocks : t.memory_efficient);
}

struct QkvColumns {
  Strided2<bf16> q, k, v;
};
QkvColumns columns(Unmanaged2<bf16> qkv, std::int64_t qd, std::int64_t kvd) {
  return {columns_of(qkv, 0, qd), columns_of(qkv, qd, kvd), columns_of(qkv, qd + kvd, kvd)};
}

// [q | k | v] = h [Wq; Wk; Wv]^T in bf16 into the kept buffer, q and k rotated there.
void project_qkv_packed(const AttentionWeights& w, const AttentionTokens& t, AttentionActivations& a,
                        const GemmOperand& h, std::int64_t N, std::int64_t qd, std::int64_t kvd) {
  const auto qkv = a.qkv.bf16_output(N, qd + 2 * kvd);
  w.qkv.forward_bf16(h, qkv, &a.qkv_lora);
  const QkvColumns c = columns(qkv, qd, kvd);
  rope_rotate_qk(c.q, c.k, t.positions, *t.rope, false);
}

// o = attention(q, k, v) on the columns of the kept [q | k | v], written in bf16 into o's kept GEMM input.
// Without the fused kernels (a CPU build) the memory-efficient ones read and write bf16 themselves
// (kernels/attention_lse.hpp: fp32 inside, one kv-head group at a time on the host); a GPU build runs the
// fused kernel here, one launch, so the CPU's launches are not counted and the step's launch count is
// what the GPU path launches.
void attend_packed(const AttentionTokens& t, AttentionActivations& a, std::int64_t qd, std::int64_t kvd) {
  const std::int64_t N = t.num_tokens();
  const QkvColumns c = columns(a.qkv.bf16_output(N, qd + 2 * kvd), qd, kvd);
  const auto o = a.o.bf16_output(N, qd);
  if (t.fused) {
    fused_attention_forward(t.shape, t.segments, c.q, c.k, c.v, o, a.lse.vec(fused_attention_stats_size(t.shape, t.segments)));
    return;
  }
  const VendorKernel launch("attention forward (host kernels for the fused one)");
  const UncountedLaunches host_only;
  attention_forward_lse_bf16(t.shape, c.q, c.k, c.v, t.seq_ids, o, a.lse.vec(rows_times_heads(t.shape)));
}

// d loss / d [q | k | v] in bf16 from dout = d loss / d (o's projection output): dattn in bf16 (autocast's
// gradient of the bf16 o; the o projection's GEMM writes it), the attention kernels' bf16 gradients as
// column blocks, dq and dk rotated back in place. The memory-efficient kernels write them over the kept
// [q | k | v], which backward reads for the last time there; the fused ones (cuDNN) read all of it while
// writing, so theirs go into scratch.
LinearGrad attention_grads_packed(const AttentionWeights& w, const AttentionTokens& t, AttentionActivations& a,
                                  const LinearGrad& dout, AttentionGradBuffers& b) {
  const std::int64_t N = t.num_tokens(), qd = w.q.out_features(), kvd = w.k.out_features(), width = qd + 2 * kvd;
  const auto qkv = a.qkv.bf16_output(N, width);
  const auto dqkv = t.fused ? kernel_scratch<bf16>("attn_dqkv_bf16", N, width) : qkv;
  const auto dattn = kernel_scratch<bf16>("attn_dout_bf16", N, qd);
  if (dgrad_writes_bf16(w.o)) {
    w.o.backward_input_bf16(dout, dattn);
  } else {
    const auto dattn32 = b.dattn.mat(N, qd);
    w.o.backward_input(dout, dattn32, 0.f);
    to_bf16(flat(Unmanaged2<const float>(dattn32)), flat(dattn));
  }
  const QkvColumns x = columns(qkv, qd, kvd), d = columns(dqkv, qd, kvd);
  const auto o = a.o.bf16_output(N, qd);
  if (t.fused) {
    fused_attention_backward(t.shape, t.segments, x.q, x.k, x.v, o, dattn,
                             a.lse.vec(fused_attention_stats_size(t.shape, t.segments)), d.q, d.k, d.v);
  } else {
    // As in attend_packed: one launch on a GPU, the CPU's widening and rounding passes uncounted.
    const VendorKernel launch("attention backward (host kernels for the fused one)");
    const UncountedLaunches host_only;
    const std::int64_t rows = rows_times_heads(t.shape);
    attention_backward_lse_bf16(t.shape, x.q, x.k, x.v, t.seq_ids, o, a.lse.vec(rows), dattn, d.q, d.k, d.v,
                                b.delta.vec(rows));
  }
  rope_rotate_qk(d.q, d.k, t.positions, *t.rope, true);
  return LinearGrad{Unmanaged2<const float>(), Unmanaged2<const bf16>(dqkv)};
}

// The staged path: q, k, v in fp32 (rounded as the bf16 path rounds: each projection's output, then
// q and k after RoPE), kept as `how` says.
Qkv project_qkv(const AttentionWeights& w, const AttentionTokens& t, AttentionActivations& a, const GemmOperand& h,
                std::int64_t N, std::int64_t qd, std::int64_t kvd, Kept how, GrowingBuffer& scratch) {
  const Qkv out = qkv_of(a, N, qd, kvd, w.qk_norm(), how, scratch, false);
  const ComputeDtype dt = w.q.dtype();
  if (w.qk_norm()) {  // Qwen3: q and k projected, kept (rounded) as their norms' backward reads them, normed
    const std::int64_t hd = w.q_norm.extent(0);
    w.q.forward(h, out.q_proj);
    w.k.forward(h, out.k_proj);
    a.q_proj.keep(out.q_proj, how);
    a.k_proj.keep(out.k_proj, how);
    rmsnorm_forward(head_rows(out.q_proj, hd), w.q_norm, w.norm_eps, head_rows(out.q, hd), a.q_rstd.vec(N * qd / hd));
    rmsnorm_forward(head_rows(out.k_proj, hd), w.k_norm, w.norm_eps, head_rows(out.k, hd), a.k_rstd.vec(N * kvd / hd));
  } else {
    w.q.forward(h, out.q);
    w.k.forward(h, out.k);
    if (dt == ComputeDtype::bf16) {
      round_activation(out.q, dt);
      round_activation(out.k, dt);
    }
  }
  w.v.forward(h, out.v);
  rope_rotate_qk(out.q, out.k, t.positions, *t.rope, false);
  a.q.keep(out.q, how);
  a.k.keep(out.k, how);
  a.v.keep(out.v, how);
  return out;
}

// The projections' gradients d loss / d (q, k, v) as their backward GEMMs read them: one each, or (stacked
// projections in bf16) d loss / d [q | k | v] as the stacked layer's GEMMs read it.
struct QkvGrads {
  LinearGrad q, k, v;
  LinearGrad qkv{Unmanaged2<const float>(), GemmOperand(Unmanaged2<const float>())};
  bool stacked = false;
};

// dq, dk, dv (fp32, each already rounded to bf16) as column blocks of one bf16 [dq | dk | dv] in scratch:
// the stacked projection's backward operand, the bits the packed path hands it.
LinearGrad stacked_grad_bf16(Unmanaged2<const float> dq, Unmanaged2<const float> dk, Unmanaged2<const float> dv) {
  const std::int64_t N = dq.extent(0), qd = dq.extent(1), kvd = dk.extent(1);
  const auto dqkv = kernel_scratch<bf16>("attn_dqkv_bf16", N, qd + 2 * kvd);
  const QkvColumns d = columns(dqkv, qd, kvd);
  to_bf16(dq, d.q);
  to_bf16(dk, d.k);
  to_bf16(dv, d.v);
  return LinearGrad{Unmanaged2<const float>(), Unmanaged2<const bf16>(dqkv)};
}

// dq, dk, dv from dattn = d loss / d o on the Kokkos kernels (fp32).
void unfused_attention_backward(const AttentionTokens& t, const Qkv& qkv, AttentionActivations& a, ComputeDtype dt,
                                Unmanaged2<const float> dattn, Unmanaged2<float> dq, Unmanaged2<float> dk,
                                Unmanaged2<float> dv, AttentionGradBuffers& b, ActivationScratch& scratch) {
  const std::int64_t N = t.num_tokens(), qd = dq.extent(1);
  if (t.memory_efficient) {
    const std::int64_t rows = rows_times_heads(t.shape);
    attention_backward_lse(t.shape, qkv.q, qkv.k, qkv.v, t.seq_ids, a.o.values(N, qd, dt, scratch.gemm_input),
                           a.lse.vec(rows), dattn, dq, dk, dv, b.delta.vec(rows));
  } else {
    attention_backward(t.shape, qkv.q, qkv.k, qkv.v, a.probs.vec(t.shape.probs_size()), dattn, dq, dk, dv,
                       b.dscores.vec(t.shape.probs_size()));
  }
}

// The staged path: fp32 gradients, in bf16 compute rounded where the bf16 path rounds them (dq and dk
// before RoPE's backward, and each as its projection's GEMMs read it).
QkvGrads attention_grads(const AttentionWeights& w, const AttentionGrads& g, const AttentionTokens& t,
                         AttentionActivations& a, const LinearGrad& dout, AttentionGradBuffers& b,
                         ActivationScratch& scratch) {
  const std::int64_t N = t.num_tokens(), qd = w.q.out_features(), kvd = w.k.out_features();
  const ComputeDtype dt = w.q.dtype();
  const Kept how = kept_as(dt, a.every_layer);
  // The fused kernels read q, k, v as bf16: kept so, they need no fp32 copies (qk_norm's backward still
  // reads the projections before their norms).
  const bool fp32_qkv = !t.fused || how != Kept::bf16 || w.qk_norm();
  const Qkv qkv = fp32_qkv ? qkv_of(a, N, qd, kvd, w.qk_norm(), how, scratch.kept, true) : Qkv{};
  auto dattn = b.dattn.mat(N, qd), dq = b.dq.mat(N, qd), dk = b.dk.mat(N, kvd), dv = b.dv.mat(N, kvd);
  w.o.backward_input(dout, dattn, 0.f);
  if (t.fused) {
    attend_fused_backward(t, qkv, a, how, dattn, dq, dk, dv);
  } else {
    if (dt == ComputeDtype::bf16) round_activation(dattn, dt);  // as the fused kernels and the bf16 path read it
    unfused_attention_backward(t, qkv, a, dt, dattn, dq, dk, dv, b, scratch);
  }
  if (dt == ComputeDtype::bf16 && !w.qk_norm()) {
    round_activation(dq, dt);
    round_activation(dk, dt);
  }
  rope_rotate_qk(dq, dk, t.positions, *t.rope, true);
  Unmanaged2<float> dq_in = dq, dk_in = dk;  // d loss / d (the projections' outputs)
  if (w.qk_norm()) {
    const std::int64_t hd = w.q_norm.extent(0);
    dq_in = b.dq_proj.mat(N, qd);
    dk_in = b.dk_proj.mat(N, kvd);
    Kokkos::deep_copy(ExecSpace(), dq_in, 0.f);  // rmsnorm_backward adds into them
    Kokkos::deep_copy(ExecSpace(), dk_in, 0.f);
    rmsnorm_backward(head_rows(qkv.q_proj, hd), w.q_norm, a.q_rstd.vec(N * qd / hd), head_rows(dq, hd),
                     head_rows(dq_in, hd), g.q_norm);
    rmsnorm_backward(head_rows(qkv.k_proj, hd), w.k_norm, a.k_rstd.vec(N * kvd / hd), head_rows(dk, hd),
                     head_rows(dk_in, hd), g.k_norm);
  }
  if (dt == ComputeDtype::bf16 && w.qkv_stacked) {
    QkvGrads out;
    out.qkv = stacked_grad_bf16(dq_in, dk_in, dv);
    out.stacked = true;
    return out;
  }
  return {w.q.grad_operand(dq_in, "attn_dq_bf16"), w.k.grad_operand(dk_in, "attn_dk_bf16"),
          w.v.grad_operand(dv, "attn_dv_bf16")};
}

// The stacked projection's backward: dW_qkv += dqkv^T h into the parts' gradients (one GEMM where they lie
// back to back, else into scratch and added to each), then dh = dqkv [Wq; Wk; Wv] (returned). kept_u: the
// LoRA u the packed path's forward kept (the staged path's forward projects q, k and v apart: recomputed).
GemmOperand stacked_qkv_backward(const AttentionWeights& w, const AttentionGrads& g, const GemmOperand& h,
                                 const LinearGrad& dqkv_in, LoraKept& kept_u, NormOutputGrad& dh,
                                 AttentionGradBuffers& b) {
  const LinearGrad dqkv = w.qkv.with_lora_operands(dqkv_in, "attn_dqkv");  // LoRA's du, once for both halves
  LinearGrads stacked;
  if (stack_linear_grads({&g.q, &g.k, &g.v}, stacked)) {
    w.qkv.backward_weight(h, dqkv, stacked, 1.f, &kept_u);
  } else {  // the weights' gradients into scratch (beta 0), then to each part; LoRA's as stacked says
    const std::int64_t in = w.qkv.in_features();
    const auto dw = b.qkv_dw.mat(w.qkv.out_features(), in);
    stacked.weight = dw;
    w.qkv.backward_weight(h, dqkv, stacked, 0.f, &kept_u);
    std::int64_t row = 0;
    const std::pair<const LinearGrads*, std::int64_t> parts[] = {
        {&g.q, w.q.out_features()}, {&g.k, w.k.out_features()}, {&g.v, w.v.out_features()}};
    for (const auto& [part, rows] : parts) {  // a frozen part (no gradient) is skipped
      const Unmanaged1<const float> part_dw(dw.data() + row * in, rows * in);
      if (part->weight.extent(0) > 0 && part->overwrite_weight) {
        Kokkos::deep_copy(ExecSpace(), flat(part->weight), part_dw);
      } else if (part->weight.extent(0) > 0) {
        add_inplace(flat(part->weight), part_dw);
      }
      row += rows;
    }
  }
  return norm_output_grad(w.qkv, dqkv, dh);
}

}  // namespace

AttentionWeights attention_weights_of(ParamSource& params, const ParamLayout& layout, const LayerParams& P,
                                      float norm_eps, ComputeDtype dtype) {
  using M = LoraModule;
  AttentionWeights w{norm_weight_of(params, P.input_layernorm), norm_eps,
                     linear_of(params, layout, P.q_proj, P.q_bias, dtype, P.lora_of(M::q_proj)),
                     linear_of(params, layout, P.k_proj, P.k_bias, dtype, P.lora_of(M::k_proj)),
                     linear_of(params, layout, P.v_proj, P.v_bias, dtype, P.lora_of(M::v_proj)),
                     linear_of(params, layout, P.o_proj, P.o_bias, dtype, P.lora_of(M::o_proj)), {}, {}, {}, false};
  if (P.q_norm >= 0) {
    w.q_norm = params.weight(P.q_norm);
    w.k_norm = params.weight(P.k_norm);
  }
  w.qkv_stacked = !w.qk_norm() && Linear::stack({&w.q, &w.k, &w.v}, w.qkv);
  return w;
}

AttentionGrads attention_grads_of(GradSink& grads, const ParamLayout& layout, const LayerParams& P) {
  using M = LoraModule;
  AttentionGrads g{grads.grad_to_write(P.input_layernorm),
                   linear_grads_of(grads, layout, P.q_proj, P.q_bias, P.lora_of(M::q_proj)),
                   linear_grads_of(grads, layout, P.k_proj, P.k_bias, P.lora_of(M::k_proj)),
                   linear_grads_of(grads, layout, P.v_proj, P.v_bias, P.lora_of(M::v_proj)),
                   linear_grads_of(grads, layout, P.o_proj, P.o_bias, P.lora_of(M::o_proj)), {}, {}};
  if (P.q_norm >= 0) {
    g.q_norm = grads.grad(P.q_norm);
    g.k_norm = grads.grad(P.k_norm);
  }
  return g;
}

void attention_block_forward(const AttentionWeights& w, const AttentionTokens& t, const Residual& x,
                             AttentionActivations& a, const Residual& out, ActivationScratch& scratch,
                             const LayerKvCache* cache, const StreamKeep& keep_x) {
  const std::int64_t N = t.num_tokens();
  const std::int64_t qd = w.q.out_features(), kvd = w.k.out_features();
  const ComputeDtype dt = w.q.dtype();
  const Kept how = kept_as(dt, a.every_layer);
  const GemmOperand h = a.h.keep_rmsnorm(keep_x, x, w.norm, w.norm_eps, a.rstd.vec(N), dt, scratch.gemm_input);
  if (cache == nullptr && packed_qkv(w, how, t)) {
    project_qkv_packed(w, t, a, h, N, qd, kvd);
    copy_stream(x, out);
    attend_packed(t, a, qd, kvd);
    w.o.forward_add(Unmanaged2<const bf16>(a.o.bf16_output(N, qd)), out, &a.o_lora);
    return;
  }
  const Qkv qkv = project_qkv(w, t, a, h, N, qd, kvd, how, scratch.kept);
  if (cache != nullptr) {
    scatter_rows(qkv.k, cache->dest, cache->k);
    scatter_rows(qkv.v, cache->dest, cache->v);
  }
  copy_stream(x, out);
  if (t.fused && cache == nullptr) {
    attend_fused(t, qkv, a, how, qd, kvd);
    w.o.forward_add(Unmanaged2<const bf16>(a.o.bf16_output(N, qd)), out, &a.o_lora);
    return;
  }
  const auto o_staged = a.o.staging(N, qd, dt, scratch.gemm_input);  // h is kept: the staging is free again
  attend(t, qkv.q, qkv.k, qkv.v, a, o_staged, cache);
  w.o.forward_add(a.o.keep(o_staged, dt), out, &a.o_lora);
}

void attention_block_backward(const AttentionWeights& w, const AttentionGrads& g, const AttentionTokens& t,
                              const GemmOperand& x, AttentionActivations& a, Unmanaged2<float> dx,
                              Unmanaged2<bf16> dx_rounded, NormOutputGrad& dh, AttentionGradBuffers& b,
                              ActivationScratch& scratch) {
  const std::int64_t N = t.num_tokens(), d = x.extent(1), qd = w.q.out_features();
  const ComputeDtype dt = w.q.dtype();
  const Kept how = kept_as(dt, a.every_layer);
  const LinearGrad dout = w.o.grad_operand(dx, dx_rounded, "attn_o_dy_bf16");
  w.o.backward_weight(a.o.kept(N, qd, dt), dout, g.o, 1.f, &a.o_lora);
  QkvGrads dqkv;
  if (packed_qkv(w, how, t)) {
    dqkv.qkv = attention_grads_packed(w, t, a, dout, b);
    dqkv.stacked = true;
  } else {
    dqkv = attention_grads(w, g, t, a, dout, b, scratch);
  }
  const GemmOperand h = a.h.kept(N, d, dt);
  if (dqkv.stacked) {
    const GemmOperand dh_values = stacked_qkv_backward(w, g, h, dqkv.qkv, a.qkv_lora, dh, b);
    rmsnorm_backward_kept(x, w.norm, a.rstd.vec(N), dh_values, dx, g.norm, dx_rounded);
    return;
  }
  // Three dgrads summed into one fp32 dh (beta 1), as autograd sums the input's three gradients.
  const auto dh32 = dh.f32.mat(N, d);
  w.q.backward_weight(h, dqkv.q, g.q);
  w.q.backward_input(dqkv.q, dh32, 0.f);
  w.k.backward_weight(h, dqkv.k, g.k);
  w.k.backward_input(dqkv.k, dh32, 1.f);
  w.v.backward_weight(h, dqkv.v, g.v);
  w.v.backward_input(dqkv.v, dh32, 1.f);
  rmsnorm_backward_kept(x, w.norm, a.rstd.vec(N), Unmanaged2<const float>(dh32), dx, g.norm, dx_rounded);
}

}  // namespace shardft
