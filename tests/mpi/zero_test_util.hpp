#pragma once
// Shared by the multi-rank equivalence tests: a tiny model, samples of varied length, the step's
// batches for this rank and for one rank holding the whole global batch.
#include <cmath>
#include <string>
#include <vector>

#include "tests/common/relative_difference.hpp"
#include "config/recipe_sections.hpp"
#include "train/run.hpp"
#include "train/trainer.hpp"

namespace shardft {
namespace {
using testing_util::rel_diff;

TrainConfig tiny(int stage, int accumulation, bool tied) {
  TrainConfig c;
  c.model.vocab_size = ByteTokenizer::kVocabSize;
  c.model.hidden_size = 32;
  c.model.num_hidden_layers = 2;
  c.model.num_attention_heads = 4;
  c.model.num_key_value_heads = 2;
  c.model.intermediate_size = 64;
  c.model.tie_word_embeddings = tied;
  c.learning_rate = 5e-3;
  c.lr_scheduler_type = "linear";
  c.warmup_steps = 1;
  c.weight_decay = 0.1;
  c.max_grad_norm = 0.5;
  c.per_device_train_batch_size = 2;
  c.gradient_accumulation_steps = accumulation;
  c.zero_stage = stage;
  c.seed = 5;
  return c;
}

// Samples of different lengths, so ranks and micro-batches hold different numbers of targets.
std::vector<TokenizedSample> samples(int n) {
  ByteTokenizer tok;
  std::vector<TokenizedSample> out;
  for (int i = 0; i < n; ++i) {
    std::string word;
    for (int k = 0; k < 2 + (i * 7) % 6; ++k) word += char('a' + (i * 5 + k * 3) % 26);
    std::string upper = word;
    for (char& ch : upper) ch = char(ch - 32);
    out.push_back(apply_chat_template(tok, {{"user", "upper: " + word}, {"assistant", upper}}, 64));
  }
  return out;
}

// This rank's micro-batches of step s, and the same step's whole global batch for one rank.
struct StepBatches {
  std::vector<TokenBatch> mine;
  TokenBatch global;
};
StepBatches step_batches(const TrainConfig& cfg, const std::vector<TokenizedSample>& data, const StepPlan& plan,
                         const std::vector<std::int64_t>& order, int s, int rank, int N) {
  StepBatches out;
  std::vector<std::int64_t> global;
  for (int m = 0; m < cfg.gradient_accumulation_steps; ++m) {
    out.mine.push_back(collate(data, micro_batch_indices(sampler_section(cfg), plan, order, s, m, rank, N)));
    for (int r = 0; r < N; ++r) {
      const auto idx = micro_batch_indices(sampler_section(cfg), plan, order, s, m, r, N);
      global.insert(global.end(), idx.begin(), idx.end());
    }
  }
  out.global = collate(data, global);
  return out;
}

}  // namespace
}  // namespace shardft
