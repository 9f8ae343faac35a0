#include "model/attention_block.hpp"

#include "kernels/attention_lse.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/kernel_scratch.hpp"
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

}  // namespace

AttentionWeights attention_weights_of(ParamSource& params, const ParamLayout& layout, const LayerParams& P,
                                      float norm_eps, ComputeDtype dtype) {
  using M = LoraModule;
  AttentionWeights w{params.weight(P.input_layernorm), norm_eps,
                     linear_of(params, layout, P.q_proj, P.q_bias, dtype, P.lora_of(M::q_proj)),
                     linear_of(params, layout, P.k_proj, P.k_bias, dtype, P.lora_of(M::k_proj)),
                     linear_of(params, layout, P.v_proj, P.v_bias, dtype, P.lora_of(M::v_proj)),
                     linear_of(params, layout, P.o_proj, P.o_bias, dtype, P.lora_of(M::o_proj)), {}, {}};
  if (P.q_norm >= 0) {
    w.q_norm = params.weight(P.q_norm);
    w.k_norm = params.weight(P.k_norm);
  }
  return w;
}

AttentionGrads attention_grads_of(GradSink& grads, const ParamLayout& layout, const LayerParams& P) {
  using M = LoraModule;
  AttentionGrads g{grads.grad(P.input_layernorm),
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

void attention_block_forward(const AttentionWeights& w, const AttentionTokens& t, Unmanaged2<const float> x,
                             AttentionActivations& a, Unmanaged2<float> out, ActivationScratch& scratch,
                             const LayerKvCache* cache) {
  const std::int64_t N = t.num_tokens(), d = x.extent(1);
  const std::int64_t qd = w.q.out_features(), kvd = w.k.out_features();
  const ComputeDtype dt = w.q.dtype();
  const Kept how = kept_as(dt, a.every_layer);
  const auto [q, k, v, q_proj, k_proj] = qkv_of(a, N, qd, kvd, w.qk_norm(), how, scratch.kept, false);
  const auto h_staged = a.h.staging(N, d, dt, scratch.gemm_input);
  rmsnorm_forward(x, w.norm, w.norm_eps, h_staged, a.rstd.vec(N));
  const GemmOperand h = a.h.keep(h_staged, dt);
  if (w.qk_norm()) {  // Qwen3: q and k projected, kept (rounded) as their norms' backward reads them, normed
    const std::int64_t hd = w.q_norm.extent(0);
    w.q.forward(h, q_proj);
    w.k.forward(h, k_proj);
    a.q_proj.keep(q_proj, how);
    a.k_proj.keep(k_proj, how);
    rmsnorm_forward(head_rows(q_proj, hd), w.q_norm, w.norm_eps, head_rows(q, hd), a.q_rstd.vec(N * qd / hd));
    rmsnorm_forward(head_rows(k_proj, hd), w.k_norm, w.norm_eps, head_rows(k, hd), a.k_rstd.vec(N * kvd / hd));
  } else {
    w.q.forward(h, q);
    w.k.forward(h, k);
  }
  w.v.forward(h, v);
  rope_rotate_qk(q, k, t.positions, *t.rope, false);
  a.q.keep(q, how);
  a.k.keep(k, how);
  a.v.keep(v, how);
  if (cache != nullptr) {
    scatter_rows(k, cache->dest, cache->k);
    scatter_rows(v, cache->dest, cache->v);
  }
  if (out.data() != x.data()) Kokkos::deep_copy(ExecSpace(), out, x);
  if (t.fused && cache == nullptr) {
    attend_fused(t, {q, k, v, {}, {}}, a, how, qd, kvd);
    w.o.forward_add(Unmanaged2<const bf16>(a.o.bf16_output(N, qd)), out);
    return;
  }
  const auto o_staged = a.o.staging(N, qd, dt, scratch.gemm_input);  // h is kept: the staging is free again
  attend(t, q, k, v, a, o_staged, cache);
  w.o.forward_add(a.o.keep(o_staged, dt), out);
}

void attention_block_backward(const AttentionWeights& w, const AttentionGrads& g, const AttentionTokens& t,
                              Unmanaged2<const float> x, AttentionActivations& a, Unmanaged2<float> dx,
                              Unmanaged2<float> dh, AttentionGradBuffers& b, ActivationScratch& scratch) {
  const std::int64_t N = t.num_tokens(), d = x.extent(1);
  const std::int64_t qd = w.q.out_features(), kvd = w.k.out_features();
  const ComputeDtype dt = w.q.dtype();
  const Kept how = kept_as(dt, a.every_layer);
  // The fused kernels read q, k, v as bf16: kept so, they need no fp32 copies (qk_norm's backward still
  // reads the projections before their norms).
  const bool fp32_qkv = !t.fused || how != Kept::bf16 || w.qk_norm();
  const Qkv qkv = fp32_qkv ? qkv_of(a, N, qd, kvd, w.qk_norm(), how, scratch.kept, true) : Qkv{};
  const auto& [q, k, v, q_proj, k_proj] = qkv;
  const GemmOperand h = a.h.kept(N, d, dt);
  auto dattn = b.dattn.mat(N, qd), dq = b.dq.mat(N, qd), dk = b.dk.mat(N, kvd), dv = b.dv.mat(N, kvd);
  w.o.backward(a.o.kept(N, qd, dt), dx, dattn, 0.f, g.o);
  if (t.fused) {
    attend_fused_backward(t, qkv, a, how, dattn, dq, dk, dv);
  } else if (t.memory_efficient) {
    const std::int64_t rows = rows_times_heads(t.shape);
    attention_backward_lse(t.shape, q, k, v, t.seq_ids, a.o.values(N, qd, dt, scratch.gemm_input), a.lse.vec(rows),
                           dattn, dq, dk, dv, b.delta.vec(rows));
  } else {
    attention_backward(t.shape, q, k, v, a.probs.vec(t.shape.probs_size()), dattn, dq, dk, dv,
                       b.dscores.vec(t.shape.probs_size()));
  }
  rope_rotate_qk(dq, dk, t.positions, *t.rope, true);
  Unmanaged2<float> dq_in = dq, dk_in = dk;  // d loss / d (the projections' outputs)
  if (w.qk_norm()) {
    const std::int64_t hd = w.q_norm.extent(0);
    dq_in = b.dq_proj.mat(N, qd);
    dk_in = b.dk_proj.mat(N, kvd);
    Kokkos::deep_copy(ExecSpace(), dq_in, 0.f);  // rmsnorm_backward adds into them
    Kokkos::deep_copy(ExecSpace(), dk_in, 0.f);
    rmsnorm_backward(head_rows(q_proj, hd), w.q_norm, a.q_rstd.vec(N * qd / hd), head_rows(dq, hd),
                     head_rows(dq_in, hd), g.q_norm);
    rmsnorm_backward(head_rows(k_proj, hd), w.k_norm, a.k_rstd.vec(N * kvd / hd), head_rows(dk, hd),
                     head_rows(dk_in, hd), g.k_norm);
  }
  w.q.backward(h, dq_in, dh, 0.f, g.q);
  w.k.backward(h, dk_in, dh, 1.f, g.k);
  w.v.backward(h, dv, dh, 1.f, g.v);
  rmsnorm_backward(x, w.norm, a.rstd.vec(N), dh, dx, g.norm);
}

}  // namespace shardft
