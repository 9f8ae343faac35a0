#pragma once
// Text generation: the next-token sampler (greedy, or softmax(logits / temperature) restricted to the
// top_k most likely tokens and then to the smallest top-p nucleus, drawn with a seeded generator) and
// the decoding loop evaluation and `shardft generate` share. Opening a model directory to talk to is
// infer/chat_model.hpp, which reads checkpoints (infer/checkpoint_read.hpp), merges adapters
// (infer/adapter_merge.hpp) and rebuilds a QLoRA base (infer/qlora_base.hpp).
//
// The decoding loop keeps a KV cache (model/decoder_cache.hpp) unless told not to: the prompts run once,
// then each new token costs one token's forward.
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "config/train_config.hpp"
#include "data/chat_template.hpp"
#include "model/decoder.hpp"
#include "model/param_source.hpp"

namespace shardft {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy (argmax; the first of equal maxima)
  double top_p = 1.0;        // in (0, 1]: the smallest set of most likely tokens whose mass is >= top_p
  int top_k = 0;             // > 0: only the top_k most likely tokens; 0: no limit
  std::uint64_t seed = 0;

  bool greedy() const { return temperature == 0.0; }
};

// Throws std::invalid_argument "temperature: ..." / "top_p: ..." / "top_k: ..." (the option's name first).
void check_sampling_options(const SamplingOptions& opt);

// A deterministic stream of draws (SplitMix64) keyed on (seed, stream): row r of a batch uses stream
// first_stream + r, so a prompt's draws do not depend on which other prompts share its batch.
class SamplingRng {
 public:
  SamplingRng(std::uint64_t seed, std::uint64_t stream);
  std::uint64_t next();
  double uniform();  // in [0, 1), 53 random bits

 private:
  std::uint64_t state_;
};

// The distribution the sampler draws from: (token, probability) pairs, most likely first (ties: lower
// id first), probabilities summing to 1. Greedy: just {argmax, 1}.
std::vector<std::pair<std::int32_t, double>> sampling_distribution(const float* logits, int vocab,
                                                                   const SamplingOptions& opt);

// One token from sampling_distribution; greedy draws nothing from rng.
std::int32_t sample_token(const float* logits, int vocab, const SamplingOptions& opt, SamplingRng& rng);

enum class FinishReason {
  stop,     // generated one of the stop ids (not included in the tokens)
  length,   // max_new_tokens generated
  context,  // the sequence reached the context limit (max_seq_length)
};
const char* finish_reason_name(FinishReason reason);  // "stop" | "length" | "context"

struct Generation {
  std::vector<std::int32_t> tokens;  // the new tokens, without the stop token
  FinishReason finish = FinishReason::length;
};

// Decodes a batch of prompts. Each row stops at any of stop_ids, after max_new_tokens new tokens, or
// when prompt + generation reach max_seq_length tokens (a prompt already that long generates nothing).
// Finished rows leave the batch. Row r samples with SamplingRng(opt.seed, first_stream + r).
// use_cache (HF generate's use_cache): true runs the prompts once into a KV cache and then feeds one
// token per row and step; false re-runs every row's whole sequence (right-padded with pad_id) for each
// token. Their logits differ only by rounding (GEMMs over fewer rows; with memory-efficient attention,
// its tiled sums), so they pick the same tokens unless two candidates tie to within that rounding.
std::vector<Generation> generate(Decoder& model, ParamSource& params,
                                 const std::vector<std::vector<std::int32_t>>& prompts, int max_new_tokens,
                                 int max_seq_length, const std::vector<std::int32_t>& stop_ids, std::int32_t pad_id,
                                 const SamplingOptions& opt, std::uint64_t first_stream = 0, bool use_cache = true);

}  // namespace shardft
