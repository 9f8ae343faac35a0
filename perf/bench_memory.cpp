// Peak memory of one training step at sequence length 2048, unfused vs fused (issue: memory-efficient
// kernels and activation checkpointing).
//
// One Trainer step on one rank (SelfCommunicator, ZeRO stage 0, fp32 unless _bf16) of a Llama-shaped model:
// hidden 512, intermediate 1536, 8 heads / 4 kv heads (head_dim 64), 4 layers, one micro-batch of
// B x 2048 random tokens, every position a target. Two vocabularies:
//   V272    shardft's byte-level tokenizer (the default task), tied embedding: the step's memory is
//           the layers' activations, as in long-context fine-tuning of a large model
//   V32000  Llama 2's vocabulary, untied LM head: 2 x 16.4M embedding / head parameters make the model
//           state (4 fp32 copies on one rank) most of the memory, and the logits [T, 32000] the largest
//           activation
// Variants, each a fresh Trainer in this process:
//   unfused       eager attention (stores the [B,H,T,T] probabilities), the whole [B*T, vocab] logits
//                 at once, every layer's intermediates kept for backward
//   mea           + memory-efficient attention (log-sum-exp per query row instead of probabilities)
//   mea_chunked   + LM head and cross-entropy fused in chunks (logits_chunk_tokens' default, 256)
//   fused         + activation checkpointing: only layer inputs kept, each layer recomputed in backward
//   <variant>_bf16  the same with `bf16: true` (bf16 compute weights and activations kept for backward;
//                 master weights, gradients and AdamW state fp32)
//
// Counters (bytes of Kokkos allocations, perf/memory_tracker.hpp; lower is better):
//   peak_bytes        the high-water mark during the step, model state included
//   state_bytes       live before the step: weights, master weights, AdamW moments, gradient buffers
//   activation_bytes  peak_bytes - state_bytes: what the step itself adds
// The step's time is reported too, but this family exists for its memory; it runs one step (the
// first step sizes every buffer, and later steps reuse them, so the peak does not change).
#include <random>
#include <string>

#include "bench_util.hpp"
#include "comm/self_communicator.hpp"
#include "data/sft_data.hpp"
#include "memory_tracker.hpp"
#include "train/trainer.hpp"

namespace shardft::perf {
namespace {

constexpr int kSeq = 2048;

struct Variant {
  const char* name;
  bool memory_efficient_attention, chunked_logits, checkpointing;
  bool bf16 = false;
};

TrainConfig long_context_config(const Variant& v, int batch, int vocab) {
  TrainConfig cfg;
  cfg.model.hidden_size = 512;
  cfg.model.intermediate_size = 1536;
  cfg.model.num_attention_heads = 8;
  cfg.model.num_key_value_heads = 4;
  cfg.model.num_hidden_layers = 4;
  cfg.model.vocab_size = vocab;
  cfg.model.tie_word_embeddings = vocab <= 272;
  cfg.model.max_position_embeddings = kSeq;
  cfg.max_seq_length = kSeq;
  cfg.per_device_train_batch_size = batch;
  cfg.attn_implementation = v.memory_efficient_attention ? "memory_efficient" : "eager";
  if (!v.chunked_logits) cfg.logits_chunk_tokens = 0;  // else the default chunk
  cfg.gradient_checkpointing = v.checkpointing;
  cfg.bf16 = v.bf16;
  return cfg;
}

TokenBatch random_batch(int batch, int vocab) {
  TokenBatch b;
  b.batch = batch;
  b.seq = kSeq;
  std::mt19937 rng(2048);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  for (int r = 0; r < batch; ++r) {
    for (int t = 0; t < kSeq; ++t) {
      b.input_ids.push_back(token(rng));
      b.position_ids.push_back(t);
      b.seq_ids.push_back(0);
    }
  }
  for (int r = 0; r < batch; ++r) {
    for (int t = 0; t < kSeq; ++t) {
      b.targets.push_back(t + 1 < kSeq ? b.input_ids[static_cast<std::size_t>(r) * kSeq + t + 1] : kIgnoreIndex);
    }
  }
  b.real_tokens = static_cast<std::int64_t>(batch) * kSeq;
  return b;
}

void step_peak_memory(benchmark::State& st, Variant v, int batch, int vocab) {
  MemoryTracker::install();
  const TrainConfig cfg = long_context_config(v, batch, vocab);
  const TokenBatch micro = random_batch(batch, cfg.model.vocab_size);
  SelfCommunicator self;
  std::int64_t state = 0, peak = 0;
  for (auto _ : st) {
    st.PauseTiming();
    Trainer tr(cfg, 1000, self);
    Kokkos::fence();
    state = MemoryTracker::live_bytes();
    MemoryTracker::reset_peak();
    st.ResumeTiming();
    const StepStats s = tr.step({micro});
    Kokkos::fence();
    benchmark::DoNotOptimize(s.loss);
    peak = MemoryTracker::peak_bytes();
  }
  st.counters["peak_bytes"] = static_cast<double>(peak);
  st.counters["state_bytes"] = static_cast<double>(state);
  st.counters["activation_bytes"] = static_cast<double>(peak - state);
  st.SetLabel("B=" + std::to_string(batch) + " T=" + std::to_string(kSeq) + " peak " +
              std::to_string(peak / 1000000) + " MB = state " + std::to_string(state / 1000000) + " MB + step " +
              std::to_string((peak - state) / 1000000) + " MB");
}

const bool registered = [] {
  const Variant variants[] = {{"unfused", false, false, false},
                              {"mea", true, false, false},
                              {"mea_chunked", true, true, false},
                              {"fused", true, true, true},
                              {"mea_chunked_bf16", true, true, false, true},
                              {"fused_bf16", true, true, true, true}};
  // The byte vocabulary in every variant (what each saving is worth); Llama 2's only unfused vs fused.
  for (const Variant& v : variants) {
    const std::string name = std::string("memory/step_h512_L4_V272/B1_T2048/") + v.name;
    // One step is the measurement; Iterations(1) and Repetitions(1) keep it to one step per run
    // (they become part of the name, which stays stable as long as they do).
    benchmark::RegisterBenchmark(name.c_str(), step_peak_memory, v, 1, 272)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(1);
  }
  for (const Variant& v : {variants[0], variants[3], variants[5]}) {
    const std::string name = std::string("memory/step_h512_L4_V32000/B1_T2048/") + v.name;
    benchmark::RegisterBenchmark(name.c_str(), step_peak_memory, v, 1, 32000)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(1);
  }
  return true;
}();

}  // namespace
}  // namespace shardft::perf
