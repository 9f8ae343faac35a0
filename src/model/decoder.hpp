#pragma once
// The Llama-family decoder: embedding, L x decoder layer (model/decoder_layer.hpp: RMSNorm, GQA
// attention with RoPE (q/k/v and o projections with optional biases: Qwen2, Llama attention_bias),
// residual, RMSNorm, SwiGLU MLP, residual), final RMSNorm, LM head, cross-entropy (model/lm_head.hpp).
// Forward and backward, block by block through a ParamSource / GradSink. Knows nothing of ranks.
#include <cstdint>
#include <memory>
#include <vector>

#include "config/model_config.hpp"
#include "kernels/types.hpp"
#include "model/growing_buffer.hpp"
#include "model/linear.hpp"
#include "model/param_layout.hpp"
#include "model/param_source.hpp"

namespace shardft {

struct KvCache;          // model/decoder_cache.hpp
struct AttentionTokens;  // model/attention_block.hpp

// One micro-batch on the device, row-major [batch, seq]. targets are already shifted (targets[t] is
// what the logits at t predict; -100 takes no loss). Tokens attend causally, and only to tokens with
// the same seq_id in their row (packed samples never see each other).
struct ModelInputs {
  int batch = 0;
  int seq = 0;
  View1<std::int32_t> input_ids, position_ids, seq_ids, targets;
  // Each token's sample: its index in the dataset, the same whichever rank and micro-batch it lands in
  // (LoRA dropout keys its mask on (sample, position)). Empty: not known.
  View1<std::int32_t> sample_ids;
  // The vocabulary size the host checked input_ids (and targets) against before uploading them; 0: not
  // checked. A model whose vocabulary is at least this large trusts the ids and never copies them back.
  int checked_vocab = 0;
  // max(position_ids) + 1 as the host saw it when uploading; 0: not known. Dynamic-NTK RoPE's frequencies
  // depend on it (the decoder copies the positions back to find it where it is not known).
  int position_limit = 0;
  // The packed samples as runs of tokens, for attention's fused kernels (kernels/attention_fused.hpp):
  // segment_starts [segments + 1] holds each run of equal seq_id within a row (its first flat token
  // index), then batch*seq; found on the host at upload. segments 0: not known (the fused kernels are
  // then not used).
  View1<std::int32_t> segment_starts;
  int segments = 0, max_segment = 0;
  std::uint64_t segments_version = 0;  // a new number for every upload of segment_starts (0: none)
};

// Copies a host micro-batch into device views, after checking on the host that every input id lies in
// [0, vocab_size) and every target is -100 or does (std::out_of_range naming the first bad one, its
// position and the vocabulary size). Where batches are built: the step itself never reads ids back.
ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets, int vocab_size);
// Device buffers a trainer keeps for its micro-batches' inputs: the uploads reuse them, so a step
// allocates nothing (a batch no larger than any before it).
// A training step's input buffers, reused from step to step: the ids, positions, seq ids, targets and
// segment starts of a micro-batch go up in one copy (`packed`, staged in `staging` on the host): each
// host-to-device copy from pageable memory has a fixed cost on a GPU host, paid while the device idles.
struct InputBuffers {
  GrowingBufferOf<std::int32_t> packed{"model_inputs"}, sample_ids{"sample_ids"};
  std::vector<std::int32_t> staging;
};
// Adds the tokens' sample ids (batch*seq of them; std::invalid_argument otherwise) to inputs; an empty
// vector leaves them unknown.
void upload_sample_ids(ModelInputs& in, const std::vector<std::int32_t>& sample_ids, InputBuffers* buffers = nullptr);
ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets, int vocab_size, InputBuffers& buffers);
// Unchecked: the decoder then checks input_ids itself on every call, through a copy to the host.
ModelInputs upload_inputs(int batch, int seq, const std::vector<std::int32_t>& input_ids,
                          const std::vector<std::int32_t>& position_ids, const std::vector<std::int32_t>& seq_ids,
                          const std::vector<std::int32_t>& targets);

struct LossSums {
  double loss_sum = 0.0;        // sum of cross-entropy over target tokens
  std::int64_t num_targets = 0;
};

class Decoder {
 public:
  // With LoRA on, the layout adds A and B to every targeted linear layer and freezes the base weights
  // (model/param_layout.hpp); the GradSink gives the frozen ones no buffer.
  Decoder(const ModelConfig& cfg, ComputeDtype dtype, const LoraSpec& lora = {});
  ~Decoder();

  const ModelConfig& config() const { return cfg_; }

  // Activation checkpointing (HF's gradient_checkpointing): keep only each layer's input through
  // forward and recompute the layer in backward. Same arithmetic, less memory, one more forward.
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  // Tokens per chunk of the fused LM head + cross-entropy (0: all at once): bounds the logits buffer
  // to chunk x vocab.
  void set_logits_chunk_tokens(std::int64_t tokens) { logits_chunk_ = tokens; }
  // Attention that keeps only a log-sum-exp per query instead of the [seq, seq] probabilities, and
  // recomputes them in backward (kernels/attention_lse.hpp).
  void set_memory_efficient_attention(bool on) { memory_efficient_attention_ = on; }
  bool memory_efficient_attention() const { return memory_efficient_attention_; }
  // Attention on the fused bf16 kernels (kernels/attention_fused.hpp, cuDNN's SDPA on a GPU) in bf16
  // compute, for inputs whose segments are known; the kernel above otherwise. The caller checks that
  // they are built and pass their self-test (infer/attention_choice.hpp). column_blocks: they read q, k,
  // v as column blocks of one array (the stacked projection's output; their own self-test), else dense.
  // deterministic_backward: false takes cuDNN's atomic backward (AttentionShape::deterministic_backward).
  void set_fused_attention(bool on, bool column_blocks = true, bool deterministic_backward = true) {
    fused_attention_ = on;
    fused_column_blocks_ = column_blocks;
    fused_deterministic_ = deterministic_backward;
  }
  bool fused_attention() const { return fused_attention_; }
  // LoRA dropout with probability p (0: off) in forward_backward only: evaluation and generation never
  // drop. The masks are drawn from (seed, step, layer, module, token, column) (kernels/dropout_mask.hpp);
  // a token is keyed by (sample id, position) where the inputs carry sample ids, else by its flat index
  // and the count of forward_backward calls since set_dropout_step.
  void set_lora_dropout(double p, std::uint64_t seed) {
    lora_dropout_ = static_cast<float>(p);
    dropout_seed_ = seed;
  }
  float lora_dropout() const { return lora_dropout_; }
  // NEFTune (alpha > 0; HF's neftune_noise_alpha): forward_backward adds uniform noise of magnitude
  // alpha / sqrt(seq * hidden_size) to the embeddings (kernels/uniform_noise.hpp), keyed like the dropout
  // masks by (seed, step, token, column); evaluation and generation see none, as HF's hook in eval mode.
  void set_neftune(double alpha, std::uint64_t seed) {
    neftune_alpha_ = static_cast<float>(alpha);
    neftune_seed_ = seed;
  }
  float neftune_alpha() const { return neftune_alpha_; }
  void set_dropout_step(std::int64_t step) {
    dropout_step_ = step;
    dropout_calls_ = 0;
  }
  const ParamLayout& layout() const { return layout_; }
  ComputeDtype dtype() const { return dtype_; }

  // Forward and backward of one micro-batch. Gradients are ADDED into the sink, as the gradient of
  // loss = (sum of CE over this micro-batch's targets) / loss_normalizer; with loss_normalizer = the
  // number of targets in the whole optimizer step, summing micro-batches gives the step's gradient.
  // The micro-batch's loss sum is added into loss_sum(0) on the device: nothing is read back (a
  // training step).
  void forward_backward(const ModelInputs& in, ParamSource& params, GradSink& grads, double loss_normalizer,
                        Unmanaged1<double> loss_sum);
  // The same, with the loss sum and target count read back to the host (tests; two host syncs).
  LossSums forward_backward(const ModelInputs& in, ParamSource& params, GradSink& grads, double loss_normalizer);
  // Kernel launches (kernels/kernel_timer.hpp, when a counter is installed) inside the decoder layers over
  // every forward_backward so far: each layer's weights acquired and read, its forward, checkpointing's
  // recompute and its backward; not the embedding, the LM head or anything after backward.
  std::int64_t layer_launches() const { return layer_launches_; }

  // Forward only: the summed loss, nothing kept for backward.
  LossSums forward_loss(const ModelInputs& in, ParamSource& params);

  // Forward only: logits [rows.extent(0), vocab] at the flat token positions `rows` (index b*seq+t).
  void forward_logits(const ModelInputs& in, ParamSource& params, View1<const std::int32_t> rows,
                      View2<float> logits);

  // Generation with a KV cache (model/decoder_cache.cpp): the same layer forward as above, over only the
  // tokens a step adds, so the logits equal forward_logits' over each row's whole prefix.
  // prefill: prompts[r] (1 to cache.max_len tokens) become row r of a fresh cache (prompts.size() ==
  // cache.rows); logits [rows, vocab] at each prompt's last token.
  void prefill(const std::vector<std::vector<std::int32_t>>& prompts, ParamSource& params, KvCache& cache,
               View2<float> logits) const;
  // decode_step: tokens[i] goes to cache row rows[i] at that row's next position; logits [rows.size(),
  // vocab] predict the token after it. Rows not named keep their cache as it is.
  void decode_step(const std::vector<int>& rows, const std::vector<std::int32_t>& tokens, ParamSource& params,
                   KvCache& cache, View2<float> logits) const;

 private:
  struct Activations;
  // The inputs checked and seen as attention sees them; the RoPE table made for them.
  AttentionTokens attention_tokens(const ModelInputs& in);
  template <class T>  // float, or bf16 (a bf16 stream)
  void embed(const ModelInputs& in, ParamSource& params, Unmanaged2<T> x) const;
  // Forward only, through the last layer: its output, with nothing kept for backward.
  Unmanaged2<const float> forward_layers(const ModelInputs& in, ParamSource& params);

  ModelConfig cfg_;
  ParamLayout layout_;
  ComputeDtype dtype_;
  bool checkpointing_ = false;
  bool memory_efficient_attention_ = false;
  bool fused_attention_ = false;
  bool fused_column_blocks_ = true;
  bool fused_deterministic_ = true;
  std::int64_t logits_chunk_ = 0;
  float lora_dropout_ = 0.f, neftune_alpha_ = 0.f;
  std::uint64_t dropout_seed_ = 0, neftune_seed_ = 0;
  std::int64_t dropout_step_ = 0, dropout_calls_ = 0;
  std::int64_t layer_launches_ = 0;
  std::unique_ptr<Activations> acts_;
};

// x = the embedding rows of ids (block 0 acquired), from the weights in the storage the source holds.
void embed_tokens(ParamSource& params, const ParamLayout& layout, Unmanaged1<const std::int32_t> ids,
                  Unmanaged2<float> x);
// The same into bf16 rows (a bf16 step's stream): a bf16 table's rows copied, an fp32 one's rounded.
void embed_tokens(ParamSource& params, const ParamLayout& layout, Unmanaged1<const std::int32_t> ids,
                  Unmanaged2<bf16> x);

// Deterministic initialisation of a flat parameter buffer (layout order) from the seed: matrices
// N(0, initializer_range) by a counter-based generator keyed on (seed, param index, element),
// norm weights 1, biases 0. Independent of how the buffer is later sharded.
void init_params(const ParamLayout& layout, const ModelConfig& cfg, std::uint64_t seed, View1<float> flat);
// Elements [begin, begin + dst.extent(0)) of one parameter, exactly as init_params writes them: a rank
// initialises only the slice it owns.
void init_param_range(const ParamLayout& layout, const ModelConfig& cfg, std::uint64_t seed, int param,
                      std::int64_t begin, Unmanaged1<float> dst);

}  // namespace shardft
