#include "model/decoder.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/attention_lse.hpp"
#include "kernels/bias.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gemm.hpp"
#include "kernels/rmsnorm.hpp"
#include "kernels/rope.hpp"
#include "kernels/rows.hpp"
#include "kernels/swiglu.hpp"
#include "model/decoder_parts.hpp"

namespace shardft {

namespace {

using decoder_parts::gate_up_weight;
using decoder_parts::round_if_bf16;
using Scratch = decoder_parts::GrowingBuffer;

}  // namespace

// What forward keeps for backward, per layer: the layer input and every intermediate a gradient needs.
// gu holds the gate and up projections side by side ([N, 2I], one GEMM); in backward it is overwritten
// by their gradients, and s by its gradient, so the MLP needs no backward buffers of its own.
struct LayerActivations {
  Scratch h1{"h1"}, rstd1{"rstd1"}, q{"q"}, k{"k"}, v{"v"}, probs{"probs"}, lse{"lse"}, o{"o"}, x_mid{"x_mid"}, h2{"h2"},
      rstd2{"rstd2"}, gu{"gu"}, s{"s"}, x_out{"x_out"};
};

struct Decoder::Activations {
  std::vector<LayerActivations> layers;
  LayerActivations recompute;  // activation checkpointing: one layer's intermediates, rebuilt in backward
  Scratch x0{"x0"}, hf{"hf"}, rstdf{"rstdf"}, logits{"logits"};
  // backward scratch, shared by all layers
  Scratch dx{"dx"}, dh{"dh"}, dattn{"dattn"}, dq{"dq"}, dk{"dk"}, dv{"dv"}, dscores{"dscores"}, delta{"delta"};
  // [gate; up] weights side by side, for a ParamSource that does not store them adjacently (gate_up_weight)
  Scratch gate_up_w{"gate_up_w"}, gate_up_dw{"gate_up_dw"};
  RopeTable rope;
};

Decoder::Decoder(const ModelConfig& cfg, ComputeDtype dtype)
    : cfg_(cfg), layout_(cfg), dtype_(dtype), acts_(std::make_unique<Activations>()) {
  acts_->layers.resize(cfg.num_hidden_layers);
}

Decoder::~Decoder() = default;

LossSums Decoder::forward_backward(const ModelInputs& in, ParamSource& params, GradSink& grads,
                                   double loss_normalizer) {
  if (!(loss_normalizer > 0)) throw std::invalid_argument("forward_backward: loss_normalizer must be > 0");
  return run(in, params, &grads, loss_normalizer, {}, {});
}

LossSums Decoder::forward_loss(const ModelInputs& in, ParamSource& params) { return run(in, params, nullptr, 1.0, {}, {}); }

void Decoder::forward_logits(const ModelInputs& in, ParamSource& params, View1<const std::int32_t> rows,
                             View2<float> logits) {
  run(in, params, nullptr, 1.0, rows, logits);
}

LossSums Decoder::run(const ModelInputs& in, ParamSource& params, GradSink* grads, double loss_normalizer,
                      View1<const std::int32_t> logit_rows, View2<float> logits_out) {
  const std::int64_t N = static_cast<std::int64_t>(in.batch) * in.seq;
  const std::int64_t d = cfg_.hidden_size, hd = cfg_.head_dim(), I = cfg_.intermediate_size, V = cfg_.vocab_size;
  const std::int64_t qd = cfg_.num_attention_heads * hd, kvd = cfg_.num_key_value_heads * hd;
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const AttentionShape ashape{in.batch, in.seq, cfg_.num_attention_heads, cfg_.num_key_value_heads, static_cast<int>(hd)};
  if (static_cast<std::int64_t>(in.input_ids.extent(0)) != N || in.targets.extent(0) != in.input_ids.extent(0) ||
      in.position_ids.extent(0) != in.input_ids.extent(0) || in.seq_ids.extent(0) != in.input_ids.extent(0)) {
    throw std::invalid_argument("Decoder: inputs must all hold batch*seq tokens");
  }
  Unmanaged1<const std::int32_t> ids(in.input_ids.data(), N), pos(in.position_ids.data(), N),
      seq_ids(in.seq_ids.data(), N), targets(in.targets.data(), N);
  // Batches from upload_inputs(..., vocab_size) were checked on the host; only others pay for a copy back.
  if (in.checked_vocab < 1 || in.checked_vocab > cfg_.vocab_size) check_token_ids(ids, cfg_.vocab_size);

  Activations& A = *acts_;
  auto W = [&](int p) { return params.weight(p); };
  // + bias, when the layer has one (index -1: none)
  auto add_bias = [&](int bias, Unmanaged2<float> y) {
    if (bias >= 0) bias_forward(y, W(bias));
  };
  auto bias_grad = [&](int bias, Unmanaged2<const float> dy) {
    if (bias >= 0) bias_backward(dy, grads->grad(bias));
  };
  auto W2 = [&](int p) {
    const auto& sh = layout_.params()[p].shape;
    return Unmanaged2<const float>(params.weight(p).data(), sh[0], sh[1]);
  };

  // RoPE angles for every position this model can see, computed once.
  const std::int64_t rope_positions = std::max<std::int64_t>(cfg_.max_position_embeddings, in.seq);
  if (static_cast<std::int64_t>(A.rope.cos.extent(0)) < rope_positions) {
    A.rope = make_rope_table(rope_positions, static_cast<int>(hd), cfg_.rope_theta);
  }

  // ---- forward --------------------------------------------------------------------------------
  A.x0.reserve(N * d);
  params.acquire(0);
  embedding_forward(ids, W2(layout_.embed_tokens()), A.x0.mat(N, d));
  params.release(0);

  // One decoder layer, x_out = layer(x_in), keeping in L what its backward needs. Recomputing for
  // backward (x_out empty) stops before the down projection: its output is not needed again.
  auto forward_layer = [&](int l, Unmanaged2<const float> x_in, LayerActivations& L, Unmanaged2<float> x_out) {
    const LayerParams& P = layout_.layer(l);
    for (auto* s : {&L.h1, &L.x_mid, &L.h2}) s->reserve(N * d);
    for (auto* s : {&L.rstd1, &L.rstd2}) s->reserve(N);
    for (auto* s : {&L.q, &L.o}) s->reserve(N * qd);
    for (auto* s : {&L.k, &L.v}) s->reserve(N * kvd);
    L.gu.reserve(N * 2 * I);
    L.s.reserve(N * I);
    const std::int64_t rows_bht = static_cast<std::int64_t>(in.batch) * cfg_.num_attention_heads * in.seq;
    if (memory_efficient_attention_) {
      L.lse.reserve(rows_bht);
    } else {
      L.probs.reserve(ashape.probs_size());
    }

    auto h1 = L.h1.mat(N, d), q = L.q.mat(N, qd), k = L.k.mat(N, kvd), v = L.v.mat(N, kvd), o = L.o.mat(N, qd);
    rmsnorm_forward(x_in, W(P.input_layernorm), eps, h1, L.rstd1.vec(N));
    round_if_bf16(dtype_, h1);
    linear_forward(h1, W(P.q_proj), q);
    add_bias(P.q_bias, q);
    linear_forward(h1, W(P.k_proj), k);
    add_bias(P.k_bias, k);
    linear_forward(h1, W(P.v_proj), v);
    add_bias(P.v_bias, v);
    rope_rotate_qk(q, k, pos, A.rope, false);
    if (memory_efficient_attention_) {
      attention_forward_lse(ashape, q, k, v, seq_ids, o, L.lse.vec(rows_bht));
    } else {
      attention_forward(ashape, q, k, v, seq_ids, o, L.probs.vec(ashape.probs_size()));
    }
    round_if_bf16(dtype_, o);
    auto x_mid = L.x_mid.mat(N, d);
    Kokkos::deep_copy(x_mid, x_in);
    linear_forward(o, W(P.o_proj), x_mid, 1.f);  // x_mid = x_in + attention
    add_bias(P.o_bias, x_mid);

    auto h2 = L.h2.mat(N, d), gu = L.gu.mat(N, 2 * I), s = L.s.mat(N, I);
    rmsnorm_forward(x_mid, W(P.post_attention_layernorm), eps, h2, L.rstd2.vec(N));
    round_if_bf16(dtype_, h2);
    gemm(Op::N, Op::T, 1.f, h2, gate_up_weight(params, P, I, d, A.gate_up_w), 0.f, gu);
    swiglu_forward_packed(gu, s);
    round_if_bf16(dtype_, s);
    if (x_out.extent(0) == 0) return;
    Kokkos::deep_copy(x_out, x_mid);
    linear_forward(s, W(P.down_proj), x_out, 1.f);  // x_out = x_mid + mlp
  };
  // With activation checkpointing only each layer's output survives forward; its intermediates are
  // rebuilt in backward into one shared scratch.
  const bool recompute = checkpointing_ && grads != nullptr;
  auto scratch_of = [&](int l) -> LayerActivations& { return recompute ? A.recompute : A.layers[l]; };

  Unmanaged2<float> x_in = A.x0.mat(N, d);
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    A.layers[l].x_out.reserve(N * d);
    auto x_out = A.layers[l].x_out.mat(N, d);
    params.acquire(l + 1);
    forward_layer(l, x_in, scratch_of(l), x_out);
    params.release(l + 1);
    x_in = x_out;
  }

  // ---- head: final norm, LM head, cross-entropy -------------------------------------------------
  const int head = layout_.head_block();
  A.hf.reserve(N * d);
  A.rstdf.reserve(N);
  params.acquire(head);
  auto hf = A.hf.mat(N, d);
  rmsnorm_forward(x_in, W(layout_.final_norm()), eps, hf, A.rstdf.vec(N));
  round_if_bf16(dtype_, hf);

  if (logits_out.extent(0) > 0) {  // generation: logits at the requested rows only
    const std::int64_t R = static_cast<std::int64_t>(logit_rows.extent(0));
    A.dh.reserve(R * d);
    auto picked = A.dh.mat(R, d);
    gather_rows(hf, logit_rows, picked);
    linear_forward(picked, W(layout_.lm_head()), logits_out);
    params.release(head);
    return {};
  }

  // LM head + cross-entropy chunked over tokens: only a [chunk, vocab] slice of logits ever exists,
  // and in training it is turned into its gradient in place and consumed at once.
  const std::int64_t chunk = logits_chunk_ > 0 ? std::min<std::int64_t>(logits_chunk_, N) : N;
  A.logits.reserve(chunk * V);
  if (grads) for (auto* s : {&A.dx, &A.dh}) s->reserve(N * d);
  CrossEntropySums ce;
  for (std::int64_t c0 = 0; c0 < N; c0 += chunk) {
    const std::int64_t rows = std::min(chunk, N - c0);
    Unmanaged2<const float> hf_c(hf.data() + c0 * d, rows, d);
    Unmanaged1<const std::int32_t> targets_c(targets.data() + c0, rows);
    auto logits = A.logits.mat(rows, V);
    linear_forward(hf_c, W(layout_.lm_head()), logits);
    const CrossEntropySums part =
        grads ? cross_entropy_forward_backward(logits, targets_c, static_cast<float>(1.0 / loss_normalizer))
              : cross_entropy_forward(logits, targets_c);
    ce.loss_sum += part.loss_sum;
    ce.count += part.count;
    if (grads) {
      linear_backward(hf_c, W(layout_.lm_head()), logits, Unmanaged2<float>(A.dh.mat(N, d).data() + c0 * d, rows, d), 0.f,
                      grads->grad(layout_.lm_head()));
    }
  }
  if (!grads) {
    params.release(head);
    return {ce.loss_sum, ce.count};
  }

  // ---- backward ---------------------------------------------------------------------------------
  for (auto* s : {&A.dattn, &A.dq}) s->reserve(N * qd);
  for (auto* s : {&A.dk, &A.dv}) s->reserve(N * kvd);
  const std::int64_t rows_bht = static_cast<std::int64_t>(in.batch) * cfg_.num_attention_heads * in.seq;
  if (memory_efficient_attention_) {
    A.delta.reserve(rows_bht);
  } else {
    A.dscores.reserve(ashape.probs_size());
  }
  auto dx = A.dx.mat(N, d), dh = A.dh.mat(N, d);

  Kokkos::deep_copy(dx, 0.f);
  rmsnorm_backward(x_in, W(layout_.final_norm()), A.rstdf.vec(N), dh, dx, grads->grad(layout_.final_norm()));
  grads->block_done(head);
  params.release(head);

  for (int l = cfg_.num_hidden_layers - 1; l >= 0; --l) {
    const LayerParams& P = layout_.layer(l);
    LayerActivations& L = scratch_of(l);
    params.acquire(l + 1);
    auto layer_in = l == 0 ? A.x0.mat(N, d) : A.layers[l - 1].x_out.mat(N, d);
    if (recompute) forward_layer(l, layer_in, L, Unmanaged2<float>());  // rebuild this layer's intermediates
    // dx holds d loss / d x_out; the residual passes it straight to x_mid and x_in.
    // Down projection: dW += dx^T s first, so that ds = dx W can overwrite s.
    auto s = L.s.mat(N, I), gu = L.gu.mat(N, 2 * I);
    gemm(Op::T, Op::N, 1.f, dx, s, 1.f, Unmanaged2<float>(grads->grad(P.down_proj).data(), d, I));
    gemm(Op::N, Op::N, 1.f, dx, W2(P.down_proj), 0.f, s);
    swiglu_backward_packed_inplace(gu, s);  // gu now holds [dg | du]
    auto h2 = L.h2.mat(N, d);
    gemm(Op::N, Op::N, 1.f, gu, gate_up_weight(params, P, I, d, A.gate_up_w), 0.f, dh);
    auto dgate = grads->grad(P.gate_proj), dup = grads->grad(P.up_proj);
    if (dup.data() == dgate.data() + I * d) {
      gemm(Op::T, Op::N, 1.f, gu, h2, 1.f, Unmanaged2<float>(dgate.data(), 2 * I, d));
    } else {
      A.gate_up_dw.reserve(2 * I * d);
      gemm(Op::T, Op::N, 1.f, gu, h2, 0.f, A.gate_up_dw.mat(2 * I, d));
      add_inplace(dgate, Unmanaged1<const float>(A.gate_up_dw.vec(2 * I * d).data(), I * d));
      add_inplace(dup, Unmanaged1<const float>(A.gate_up_dw.vec(2 * I * d).data() + I * d, I * d));
    }
    rmsnorm_backward(L.x_mid.mat(N, d), W(P.post_attention_layernorm), L.rstd2.vec(N), dh, dx,
                     grads->grad(P.post_attention_layernorm));

    auto dattn = A.dattn.mat(N, qd), dq = A.dq.mat(N, qd), dk = A.dk.mat(N, kvd), dv = A.dv.mat(N, kvd);
    linear_backward(L.o.mat(N, qd), W(P.o_proj), dx, dattn, 0.f, grads->grad(P.o_proj));
    bias_grad(P.o_bias, dx);  // dx is d loss / d x_mid here
    if (memory_efficient_attention_) {
      attention_backward_lse(ashape, L.q.mat(N, qd), L.k.mat(N, kvd), L.v.mat(N, kvd), seq_ids, L.o.mat(N, qd),
                             L.lse.vec(rows_bht), dattn, dq, dk, dv, A.delta.vec(rows_bht));
    } else {
      attention_backward(ashape, L.q.mat(N, qd), L.k.mat(N, kvd), L.v.mat(N, kvd), L.probs.vec(ashape.probs_size()),
                         dattn, dq, dk, dv, A.dscores.vec(ashape.probs_size()));
    }
    rope_rotate_qk(dq, dk, pos, A.rope, true);
    // dq, dk, dv are now the gradients of the projections' outputs, biases included
    bias_grad(P.q_bias, dq);
    bias_grad(P.k_bias, dk);
    bias_grad(P.v_bias, dv);
    auto h1 = L.h1.mat(N, d);
    linear_backward(h1, W(P.q_proj), dq, dh, 0.f, grads->grad(P.q_proj));
    linear_backward(h1, W(P.k_proj), dk, dh, 1.f, grads->grad(P.k_proj));
    linear_backward(h1, W(P.v_proj), dv, dh, 1.f, grads->grad(P.v_proj));
    rmsnorm_backward(layer_in, W(P.input_layernorm), L.rstd1.vec(N), dh, dx, grads->grad(P.input_layernorm));
    grads->block_done(l + 1);
    params.release(l + 1);
  }

  // The embedding's backward is a scatter-add of dx: it needs no weights, so block 0 is not acquired.
  const std::int64_t e = layout_.embed_tokens();
  embedding_backward(ids, dx, Unmanaged2<float>(grads->grad(e).data(), V, d));
  grads->block_done(0);
  return {ce.loss_sum, ce.count};
}

}  // namespace shardft
