#include "model/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/elementwise.hpp"
#include "kernels/attention_fused.hpp"
#include "kernels/dropout_mask.hpp"
#include "kernels/embedding.hpp"
#include "kernels/kernel_scratch.hpp"
#include "kernels/kernel_timer.hpp"
#include "kernels/rows.hpp"
#include "kernels/uniform_noise.hpp"
#include "model/decoder_layer.hpp"
#include "model/lm_head.hpp"
#include "model/rope_frequencies.hpp"

namespace shardft {

// The buffers of a step, kept from step to step.
struct Decoder::Activations {
  // Each layer's input (the embedding's output, then each layer's output): backward reads every one
  // again. The last entry is the last layer's output, which only the head reads, right after forward.
  std::vector<KeptActivation> inputs;
  std::vector<LayerActivations> saved;  // each layer's intermediates for backward (no checkpointing)
  // One layer's intermediates, the scratch of forward-only runs (fp32 buffers rounded in place: read with
  // no copies, and nothing is kept for a backward).
  LayerActivations scratch;
  // One layer's intermediates under checkpointing, written by forward and rebuilt layer by layer in
  // backward: kept as every layer's are without checkpointing (bf16 in a bf16 step), so forward and the
  // recompute take the same kernels as a step that keeps every layer, with the same bits.
  LayerActivations recompute{/*every_layer=*/true};
  GateUpCopy gate_up_copy;
  GrowingBuffer dx{"dx"};
  HeadBuffers head;
  LayerGradBuffers grad_buffers;
  LayerStaging staging;
  RopeTable rope;
  std::int64_t rope_length = 0;  // the rope_frequency_length the table was made for
  GrowingBufferOf<double> loss_sum{"loss_sum"};  // forward_backward's, when the caller reads it back
  GrowingBufferOf<std::uint64_t> dropout_keys{"dropout_row_keys"};
};

namespace {

// NEFTune's noise stream: the dropout streams' layer field, past any layer index.
constexpr int kNeftuneStreamLayer = 0xffffff;
// max(position_ids) + 1: from the host's upload where it is known, else reduced on the device (a read
// back that only dynamic-NTK RoPE asks for).
std::int64_t position_limit(const ModelInputs& in) {
  if (in.position_limit > 0) return in.position_limit;
  std::int32_t top = -1;
  const auto pos = in.position_ids;
  Kokkos::parallel_reduce(
      "position_limit", Range(0, pos.extent(0)),
      KOKKOS_LAMBDA(const std::int64_t n, std::int32_t& m) {
        if (pos(n) > m) m = pos(n);
      },
      Kokkos::Max<std::int32_t>(top));
  return static_cast<std::int64_t>(top) + 1;
}
}  // namespace

Decoder::Decoder(const ModelConfig& cfg, ComputeDtype dtype, const LoraSpec& lora)
    : cfg_(cfg), layout_(cfg, lora), dtype_(dtype), acts_(std::make_unique<Activations>()) {
  acts_->inputs.resize(cfg.num_hidden_layers + 1, KeptActivation("layer_input"));
  acts_->saved.resize(cfg.num_hidden_layers, LayerActivations(/*every_layer=*/true));
}

Decoder::~Decoder() = default;

AttentionTokens Decoder::attention_tokens(const ModelInputs& in) {
  const std::int64_t N = static_cast<std::int64_t>(in.batch) * in.seq;
  if (static_cast<std::int64_t>(in.input_ids.extent(0)) != N || in.targets.extent(0) != in.input_ids.extent(0) ||
      in.position_ids.extent(0) != in.input_ids.extent(0) || in.seq_ids.extent(0) != in.input_ids.extent(0)) {
    throw std::invalid_argument("Decoder: inputs must all hold batch*seq tokens");
  }
  // Batches from upload_inputs(..., vocab_size) were checked on the host; only others pay for a copy back.
  if (in.checked_vocab < 1 || in.checked_vocab > cfg_.vocab_size) check_token_ids(in.input_ids, cfg_.vocab_size);
  // RoPE angles for every position this model can see, computed once (dynamic NTK: again whenever a
  // call's length beyond max_position_embeddings changes, as transformers recomputes its frequencies).
  const std::int64_t rope_positions = std::max<std::int64_t>(cfg_.max_position_embeddings, in.seq);
  const std::int64_t rope_length =
      cfg_.rope_scaling.type == "dynamic" ? rope_frequency_length(cfg_, position_limit(in)) : 0;
  RopeTable& rope = acts_->rope;
  if (static_cast<std::int64_t>(rope.cos.extent(0)) < rope_positions || acts_->rope_length != rope_length) {
    rope = make_model_rope_table(cfg_, rope_positions, rope_length);
    acts_->rope_length = rope_length;
  }
  AttentionShape shape{in.batch, in.seq, cfg_.num_attention_heads, cfg_.num_key_value_heads, cfg_.head_dim()};
  shape.deterministic_backward = fused_deterministic_;
  AttentionTokens t;
  t.shape = shape;
  t.positions = in.position_ids;
  t.seq_ids = in.seq_ids;
  t.rope = &rope;
  t.memory_efficient = memory_efficient_attention_;
  if (fused_attention_ && dtype_ == ComputeDtype::bf16 && in.segments > 0) {
    t.fused = true;
    t.fused_column_blocks = fused_column_blocks_;
    t.segments = {in.segment_starts, in.segments, in.max_segment, in.segments_version};
    fused_attention_prepare(shape, t.segments, fused_column_blocks_);  // per batch, not in the first layer
  }
  return t;
}

void embed_tokens(ParamSource& params, const ParamLayout& layout, Unmanaged1<const std::int32_t> ids,
                  Unmanaged2<float> x) {
  const Unmanaged2<const bf16> table16 = weight_matrix_bf16(params, layout, layout.embed_tokens());
  if (table16.extent(0) > 0) {
    gather_rows(table16, ids, x);  // bf16 storage: the rows widened (exact)
  } else {
    embedding_forward(ids, weight_matrix(params, layout, layout.embed_tokens()), x);
  }
}

void embed_tokens(ParamSource& params, const ParamLayout& layout, Unmanaged1<const std::int32_t> ids,
                  Unmanaged2<bf16> x) {
  const Unmanaged2<const bf16> table16 = weight_matrix_bf16(params, layout, layout.embed_tokens());
  if (table16.extent(0) > 0) {
    gather_rows(table16, ids, x);  // the bf16 table's rows as they are
    return;
  }
  // bf16 values in an fp32 table: gathered in fp32, rounded (exactly) into the stream
  const auto wide = kernel_scratch<float>("embedding_f32", x.extent(0), x.extent(1));
  embed_tokens(params, layout, ids, wide);
  to_bf16(flat(Unmanaged2<const float>(wide)), flat(x));
}

template <class T>
void Decoder::embed(const ModelInputs& in, ParamSource& params, Unmanaged2<T> x) const {
  params.acquire(0, Pass::forward);
  embed_tokens(params, layout_, in.input_ids, x);
  params.release(0, Pass::forward);
}

LossSums Decoder::forward_backward(const ModelInputs& in, ParamSource& params, GradSink& grads,
                                   double loss_normalizer) {
  const auto sum = acts_->loss_sum.vec(1);
  Kokkos::deep_copy(ExecSpace(), sum, 0.0);
  forward_backward(in, params, grads, loss_normalizer, sum);
  return {read_scalar(sum, "training loss"), cross_entropy_target_count(in.targets)};
}

void Decoder::forward_backward(const ModelInputs& in, ParamSource& params, GradSink& grads, double loss_normalizer,
                               Unmanaged1<double> loss_sum) {
  if (!(loss_normalizer > 0)) throw std::invalid_argument("forward_backward: loss_normalizer must be > 0");
  const AttentionTokens t = attention_tokens(in);
  const std::int64_t N = t.num_tokens(), d = cfg_.hidden_size;
  const int L = cfg_.num_hidden_layers, head = layout_.head_block();
  Activations& A = *acts_;
  // Where layer l's input is written: its own buffer, or, kept as bf16, the bf16 stream every layer updates
  // in place (each layer's first norm keeps a copy); NEFTune's noise is added to the embedding in fp32
  // scratch first.
  const Kept inputs_as = kept_as(dtype_, true);
  auto input_of = [&](int l) { return A.inputs[l].staging(N, d, inputs_as, A.staging.input); };
  const bool bf16_stream = inputs_as == Kept::bf16;
  auto stream_of = [&](int l) { return bf16_stream ? Residual(A.staging.stream.mat(N, d)) : Residual(input_of(l)); };
  auto saved_of = [&](int l) -> LayerActivations& { return checkpointing_ ? A.recompute : A.saved[l]; };
  Unmanaged1<const std::uint64_t> row_key;
  if (lora_dropout_ > 0.f || neftune_alpha_ > 0.f) {
    const auto keys = A.dropout_keys.vec(N);
    if (in.sample_ids.extent(0) > 0) {
      dropout_row_keys(in.sample_ids, in.position_ids, keys);
    } else {
      dropout_row_keys_flat(dropout_calls_, keys);
    }
    row_key = keys;
  }
  ++dropout_calls_;
  auto weights_of = [&](int l) {
    LayerWeights w = layer_weights_of(params, layout_, cfg_, l, dtype_, A.gate_up_copy);
    if (lora_dropout_ > 0.f) {
      set_layer_lora_dropout(w, layout_.layer(l), l, lora_dropout_, dropout_seed_, dropout_step_, row_key);
    }
    return w;
  };

  if (bf16_stream && !(neftune_alpha_ > 0.f)) {
    embed(in, params, stream_of(0).b16);
  } else {
    embed(in, params, input_of(0));
    if (neftune_alpha_ > 0.f) {
      // HF: alpha / sqrt(output.size(1) * output.size(2)), the batch's padded length times the width.
      const float magnitude = neftune_alpha_ / std::sqrt(static_cast<float>(in.seq) * static_cast<float>(d));
      add_uniform_noise(input_of(0), magnitude, dropout_stream(neftune_seed_, dropout_step_, kNeftuneStreamLayer, 0),
                        row_key);
    }
    if (bf16_stream) to_bf16(flat(Unmanaged2<const float>(input_of(0))), flat(stream_of(0).b16));  // NEFTune's sum
  }
  std::int64_t launches_before = kernel_launches();
  for (int l = 0; l < L; ++l) {
    params.acquire(l + 1, Pass::forward);
    // Each layer's input is kept by the layer's first norm as it reads it; the last layer's output goes
    // to the LM head, rounded by the layer (a bf16 stream is rounded already).
    const bool kept = l + 1 < L;
    decoder_layer_forward(weights_of(l), t, stream_of(l), saved_of(l), stream_of(l + 1), A.staging, nullptr, kept,
                          StreamKeep{&A.inputs[l], stream_of(l), inputs_as});
    params.release(l + 1, Pass::forward);
  }
  layer_launches_ += kernel_launches() - launches_before;

  const auto dx = A.dx.mat(N, d);
  params.acquire(head, Pass::backward);  // the loss and its gradient: backward starts here
  head_loss_backward(head_weights_of(params, layout_, cfg_, dtype_), head_grads_of(grads, layout_), stream_of(L),
                     in.targets, logits_chunk_, static_cast<float>(1.0 / loss_normalizer), A.head,
                     A.grad_buffers.dh, dx,
                     dtype_ == ComputeDtype::bf16 ? A.grad_buffers.dx_rounded.mat(N, d) : Unmanaged2<bf16>(), loss_sum);
  grads.block_done(head);
  params.release(head, Pass::backward);

  launches_before = kernel_launches();
  for (int l = L - 1; l >= 0; --l) {
    params.acquire(l + 1, Pass::backward);
    const LayerWeights w = weights_of(l);
    // Under checkpointing forward kept only the layer's input.
    if (checkpointing_) decoder_layer_recompute(w, t, A.inputs[l], inputs_as, A.recompute, A.staging);
    decoder_layer_backward(w, layer_grads_of(grads, layout_, l), t, A.inputs[l].kept(N, d, inputs_as), saved_of(l), dx,
                           A.grad_buffers, A.staging);
    grads.block_done(l + 1);
    params.release(l + 1, Pass::backward);
  }
  layer_launches_ += kernel_launches() - launches_before;
  // The embedding's backward is a scatter-add of dx: it needs no weights, so block 0 is not acquired.
  const Unmanaged2<float> embed_grad = grad_matrix(grads, layout_, layout_.embed_tokens());
  if (embed_grad.extent(0) > 0) embedding_backward(in.input_ids, dx, embed_grad);  // empty: frozen
  grads.block_done(0);
}

Unmanaged2<const float> Decoder::forward_layers(const ModelInputs& in, ParamSource& params) {
  const AttentionTokens t = attention_tokens(in);
  Activations& A = *acts_;
  const auto x = A.inputs[0].staging(t.num_tokens(), cfg_.hidden_size, kept_as(dtype_, true), A.staging.input);
  embed(in, params, x);
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    params.acquire(l + 1, Pass::forward);
    decoder_layer_forward(layer_weights_of(params, layout_, cfg_, l, dtype_, A.gate_up_copy), t, x, A.scratch, x,
                          A.staging);
    params.release(l + 1, Pass::forward);
  }
  return x;
}

LossSums Decoder::forward_loss(const ModelInputs& in, ParamSource& params) {
  const auto x = forward_layers(in, params);
  params.acquire(layout_.head_block(), Pass::forward);
  const CrossEntropySums loss =
      head_loss(head_weights_of(params, layout_, cfg_, dtype_), x, in.targets, logits_chunk_, acts_->head);
  params.release(layout_.head_block(), Pass::forward);
  return {loss.loss_sum, loss.count};
}

void Decoder::forward_logits(const ModelInputs& in, ParamSource& params, View1<const std::int32_t> rows,
                             View2<float> logits) {
  const auto x = forward_layers(in, params);
  params.acquire(layout_.head_block(), Pass::forward);
  head_logits(head_weights_of(params, layout_, cfg_, dtype_), x, rows, acts_->head, logits);
  params.release(layout_.head_block(), Pass::forward);
}

}  // namespace shardft
