// One full optimizer step through train::Trainer on a single rank (SelfCommunicator, ZeRO stage from
// the TrainConfig default): forward + backward of every micro-batch, the engine's gradient reduction
// (a copy on one rank), clipping, AdamW on the fp32 master weights, refresh of the compute weights.
//
// Counters:
//   tokens_per_second  non-padding tokens per second (StepStats::tokens, as `shardft train` logs it)
//   GFLOPS             achieved model FLOP/s of the step, over every position computed (padding too):
//       FLOPs = 6 * P_gemm * B*T                                    (2 forward + 4 backward per weight)
//             + L * B * H * 3 * 2*hd*T(T+1)                          (causal attention, fwd + 2x for bwd)
//     where P_gemm = L * (2*d*H*hd + 2*d*G*hd + 3*d*I) + V*d counts every weight a token multiplies:
//     q, k, v, o, gate, up, down per layer, and the (tied) LM head; norm weights and the embedding
//     lookup do no GEMM work and are left out. Optimizer, norms, RoPE, SwiGLU and the loss are not
//     counted as FLOPs (they are memory-bound and O(params) or O(B*T*d)).
// Compare GFLOPS with gemm_mix/step_gemms (the same GEMMs alone) and gemm/square (sgemm peak).
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "comm/self_communicator.hpp"
#include "data/sft_data.hpp"
#include "train/trainer.hpp"

namespace shardft::perf {
namespace {

double step_flops(const ModelConfig& c, std::int64_t B, std::int64_t T) {
  const double d = c.hidden_size, hd = c.head_dim(), I = c.intermediate_size, V = c.vocab_size;
  const double H = c.num_attention_heads, G = c.num_key_value_heads, L = c.num_hidden_layers;
  const double p_gemm = L * (2 * d * H * hd + 2 * d * G * hd + 3 * d * I) + V * d;
  const double gemm = 6.0 * p_gemm * static_cast<double>(B * T);
  const double attention = L * static_cast<double>(B) * H * 3.0 * 2.0 * hd * static_cast<double>(T) * (T + 1.0);
  return gemm + attention;
}

void run_steps(benchmark::State& st, const TrainConfig& cfg, const std::vector<TokenBatch>& micro) {
  SelfCommunicator self;
  Trainer tr(cfg, 1000000, self);  // a long schedule: the learning rate stays near its peak
  std::int64_t positions = 0, tokens = 0;
  for (const TokenBatch& mb : micro) positions += static_cast<std::int64_t>(mb.batch) * mb.seq;
  double flops = 0.0;
  for (const TokenBatch& mb : micro) flops += step_flops(cfg.model, mb.batch, mb.seq);
  // One untimed step first: the decoder sizes its activation buffers on the first micro-batch.
  tr.step(micro);
  for (auto _ : st) {
    const StepStats s = tr.step(micro);
    Kokkos::fence();
    tokens = s.tokens;
    benchmark::DoNotOptimize(s.loss);
  }
  st.counters["tokens_per_second"] = per_second(static_cast<double>(tokens));
  report_gflops(st, flops);
  st.SetLabel("B=" + std::to_string(micro.front().batch) + " T=" + std::to_string(micro.front().seq) +
              " tokens=" + std::to_string(tokens) + "/" + std::to_string(positions) +
              " params=" + std::to_string(tr.model().layout().total_numel()) + " zero_stage=" + std::to_string(cfg.zero_stage) +
              " GFLOP/step=" + std::to_string(flops / 1e9));
}

// The default recipe (ModelConfig defaults) at per_device_train_batch_size 16 on the shipped SFT data:
// the first 16 samples of epoch 0's permutation, padded to the longest (about 24 tokens).
void train_step_default(benchmark::State& st) {
  TrainConfig cfg;
  cfg.per_device_train_batch_size = 16;
  cfg.dataset_path = std::string(SHARDFT_SOURCE_DIR) + "/jobs/data/sft_train.jsonl";
  static const std::vector<TokenBatch> micro = [&] {
    const ByteTokenizer tok;
    std::vector<TokenizedSample> samples;
    for (const Conversation& c : read_conversations_jsonl(cfg.dataset_path)) {
      samples.push_back(apply_chat_template(tok, c, cfg.max_seq_length));
    }
    const auto perm = epoch_permutation(static_cast<std::int64_t>(samples.size()), cfg.seed, 0);
    const std::vector<std::int64_t> first(perm.begin(), perm.begin() + cfg.per_device_train_batch_size);
    return std::vector<TokenBatch>{collate(samples, first)};
  }();
  run_steps(st, cfg, micro);
}

// A GEMM-heavier config for MFU work: hidden 512, intermediate 1536, 8 heads / 4 kv heads, 2 layers,
// one 512-token sequence of random byte tokens, every position a target.
// attn_implementation selects the attention kernel: "eager" (probabilities
// [B,H,T,T] stored for backward) or "memory_efficient" (the TrainConfig default: log-sum-exp saved,
// tiled kernel). train_step/default_h128_L2/B16 runs the default.
void train_step_wide(benchmark::State& st, const std::string& attn_implementation) {
  TrainConfig cfg;
  cfg.attn_implementation = attn_implementation;
  cfg.model.hidden_size = 512;
  cfg.model.intermediate_size = 1536;
  cfg.model.num_attention_heads = 8;
  cfg.model.num_key_value_heads = 4;
  cfg.model.num_hidden_layers = 2;
  cfg.model.max_position_embeddings = 512;
  cfg.max_seq_length = 512;
  cfg.per_device_train_batch_size = 1;
  TokenBatch b;
  b.batch = 1;
  b.seq = 512;
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int t = 0; t < b.seq; ++t) {
    b.input_ids.push_back(byte(rng));
    b.position_ids.push_back(t);
    b.seq_ids.push_back(0);
  }
  for (int t = 0; t < b.seq; ++t) b.targets.push_back(t + 1 < b.seq ? b.input_ids[t + 1] : kIgnoreIndex);
  b.real_tokens = b.seq;
  run_steps(st, cfg, {b});
}

const bool registered = [] {
  // No per-benchmark MinTime / Iterations: they would become part of the name ("/min_time:0.500"),
  // and a baseline would stop matching when they change. The wide step (most of a second) runs one
  // timed iteration per repetition at run.sh's --benchmark_min_time=0.1.
  benchmark::RegisterBenchmark("train_step/default_h128_L2/B16", train_step_default)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("train_step/wide_h512_L2/B1_T512",
                               [](benchmark::State& st) { train_step_wide(st, "eager"); })
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("train_step/wide_h512_L2/B1_T512_mea",
                               [](benchmark::State& st) { train_step_wide(st, "memory_efficient"); })
      ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
}  // namespace shardft::perf
