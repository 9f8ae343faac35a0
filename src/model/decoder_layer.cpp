#include "model/decoder_layer.hpp"

#include <stdexcept>
#include <utility>

#include "kernels/elementwise.hpp"

namespace shardft {

LayerWeights layer_weights_of(ParamSource& params, const ParamLayout& layout, const ModelConfig& cfg, int layer,
                              ComputeDtype dtype, GateUpCopy& gate_up_copy) {
  const LayerParams& P = layout.layer(layer);
  const float eps = static_cast<float>(cfg.rms_norm_eps);
  return {attention_weights_of(params, layout, P, eps, dtype),
          mlp_weights_of(params, layout, P, eps, dtype, gate_up_copy)};
}

LayerGrads layer_grads_of(GradSink& grads, const ParamLayout& layout, int layer) {
  const LayerParams& P = layout.layer(layer);
  return {attention_grads_of(grads, layout, P), mlp_grads_of(grads, layout, P)};
}

void set_layer_lora_dropout(LayerWeights& w, const LayerParams& P, int layer, float p, std::uint64_t seed,
                            std::int64_t step, Unmanaged1<const std::uint64_t> row_key) {
  using M = LoraModule;
  auto mask = [&](M m) { return DropoutMask{p, dropout_stream(seed, step, layer, static_cast<int>(m)), row_key}; };
  const std::pair<Linear*, M> single[] = {{&w.attention.q, M::q_proj}, {&w.attention.k, M::k_proj},
                                          {&w.attention.v, M::v_proj}, {&w.attention.o, M::o_proj},
                                          {&w.mlp.down, M::down_proj}};
  for (const auto& [linear, m] : single) {
    if (P.lora_of(m).on()) linear->set_lora_dropout(0, mask(m));
  }
  int term = 0;  // the fused [gate | up] layer's terms, in the order mlp_weights_of added them
  for (M m : {M::gate_proj, M::up_proj}) {
    if (P.lora_of(m).on()) w.mlp.gate_up.set_lora_dropout(term++, mask(m));
  }
  if (!w.attention.qkv_stacked) return;
  term = 0;  // the stacked [q | k | v] layer's terms: its parts', in order (Linear::stack)
  for (M m : {M::q_proj, M::k_proj, M::v_proj}) {
    if (P.lora_of(m).on()) w.attention.qkv.set_lora_dropout(term++, mask(m));
  }
}

LayerActivations::LayerActivations(bool every_layer_in) : every_layer(every_layer_in) {
  attention.every_layer = every_layer;
  mlp.every_layer = every_layer;
}

void decoder_layer_forward(const LayerWeights& w, const AttentionTokens& t, const Residual& x,
                           LayerActivations& a, const Residual& out, LayerStaging& s, const LayerKvCache* cache,
                           bool out_kept, const StreamKeep& keep_x) {
  const ComputeDtype dt = w.attention.q.dtype();
  const Kept how = kept_as(dt, a.every_layer);
  if (x.is_bf16) {  // updated in place (or rebuilt: empty out), x_mid kept as the MLP's norm reads it
    if (how != Kept::bf16 || (!out.empty() && out.data() != x.data())) {
      throw std::logic_error("decoder_layer_forward: a bf16 stream is updated in place by layers keeping bf16");
    }
    attention_block_forward(w.attention, t, x, a.attention, x, s.blocks, cache, keep_x);
    mlp_block_forward(w.mlp, x, a.mlp, out, s.blocks, StreamKeep{&a.x_mid, x, how});
    return;
  }
  if (how == Kept::bf16) throw std::logic_error("decoder_layer_forward: layers keeping bf16 take a bf16 stream");
  const std::int64_t N = x.rows(), d = x.cols();
  // In place, no backward follows (forward-only runs): x_mid is the stream itself, not kept.
  const bool in_place = out.data() != nullptr && out.data() == x.data();
  const Unmanaged2<float> x_mid = in_place ? out.f32 : a.x_mid.staging(N, d, how, s.x_mid);
  attention_block_forward(w.attention, t, x, a.attention, x_mid, s.blocks, cache, keep_x);
  if (in_place) round_activation(x_mid, dt);
  // x_mid kept by the MLP's norm as it reads it
  mlp_block_forward(w.mlp, x_mid, a.mlp, out, s.blocks, in_place ? StreamKeep{} : StreamKeep{&a.x_mid, x_mid, how});
  if (!out.empty() && !out_kept) round_activation(out.f32, dt);
}

void decoder_layer_recompute(const LayerWeights& w, const AttentionTokens& t, KeptActivation& input, Kept input_as,
                             LayerActivations& a, LayerStaging& s) {
  const std::int64_t N = t.num_tokens(), d = w.attention.o.out_features();
  const Kept how = kept_as(w.attention.q.dtype(), a.every_layer);
  if (input_as != Kept::bf16 || how != Kept::bf16) {  // the input's own fp32 buffer, which must stay as it is
    decoder_layer_forward(w, t, input.values(N, d, input_as, s.input), a, {}, s);
    return;
  }
  // The kept input copied into the stream's buffer (free in backward), where the attention block adds its
  // output in place, as forward did.
  const Unmanaged2<bf16> x_mid = s.stream.mat(N, d);
  Kokkos::deep_copy(ExecSpace(), x_mid, input.kept_bf16(N, d));
  decoder_layer_forward(w, t, x_mid, a, {}, s);
}

void decoder_layer_backward(const LayerWeights& w, const LayerGrads& g, const AttentionTokens& t,
                            const GemmOperand& x, LayerActivations& a, Unmanaged2<float> dx, LayerGradBuffers& b,
                            LayerStaging& s) {
  const std::int64_t N = x.extent(0), d = x.extent(1);
  const Kept how = kept_as(w.attention.q.dtype(), a.every_layer);
  const auto dx16 = w.attention.q.dtype() == ComputeDtype::bf16 ? b.dx_rounded.mat(N, d) : Unmanaged2<bf16>();
  mlp_block_backward(w.mlp, g.mlp, a.x_mid.kept(N, d, how), a.mlp, dx, dx16, b.dh, b.mlp, s.blocks);
  attention_block_backward(w.attention, g.attention, t, x, a.attention, dx, dx16, b.dh, b.attention, s.blocks);
}

}  // namespace shardft
