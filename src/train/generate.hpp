#pragma once
// Text generation: the next-token sampler (greedy, or softmax(logits / temperature) restricted to the
// top_k most likely tokens and then to the smallest top-p nucleus, drawn with a seeded generator), the
// decoding loop evaluation and `shardft generate` share, and opening a model directory to talk to.
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

// ---- a model to talk to ------------------------------------------------------------------------

// Everything `shardft generate` needs, opened from a model directory.
struct ChatModel {
  TrainConfig cfg;  // the recipe after the directory filled in what it knows (model shape, template, ...)
  std::unique_ptr<Decoder> model;
  std::unique_ptr<LocalParams> params;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatEncoder> encoder;
  int context_limit = 0;     // prompt + generation, in tokens
  std::string source;        // what was loaded, for the log: "checkpoint runs/x/checkpoint-40 (step 40)"
  std::string limit_reason;  // where context_limit comes from: "max_seq_length" | "max_position_embeddings" | ...
};

// Opens `dir` (called `what` in messages, e.g. "--model"):
//   - an HF model directory, which every finished `shardft train` output_dir is: config.json with
//     model.safetensors or model.safetensors.index.json; the shape comes from config.json;
//   - a checkpoint directory (checkpoint-N, metadata.json + HDF5 rank files): the fp32 master weights,
//     the shape from its metadata;
//   - a training output_dir without a final model but with checkpoints: its `latest` checkpoint.
// The tokenizer is the recipe's tokenizer_name_or_path when the recipe sets it, else the directory's
// tokenizer.json, else the run's. A run's recipe (the checkpoint's metadata, or for an output_dir its
// latest checkpoint's) fills tokenizer_name_or_path, chat_template, max_seq_length, bf16 and
// dataset_text_field where `cfg` does not set them (cfg.sources says which it sets).
// The context limit is max_position_embeddings, lowered to a sliding_window and to max_seq_length
// when that is set. Throws ConfigError / FormatError naming `what`, the directory or the file.
ChatModel open_chat_model(const std::string& dir, const std::string& what, TrainConfig cfg, std::ostream& log);

// A prompt to generate from: the conversation up to the answer (a final assistant turn is the
// reference and is left out), rendered with the template's generation prompt; a plain-text sample is
// continued (beginning-of-text and its text, no end). `system` (when not empty) is added as the first
// turn of conversations that have no system turn.
struct ChatPrompt {
  Conversation turns;     // what the model is shown (without the reference)
  std::string reference;  // the dropped final assistant turn's content, "" when none
  bool has_reference = false;
  std::vector<std::int32_t> ids;
};
ChatPrompt make_chat_prompt(const ChatEncoder& encoder, Conversation conv, const std::string& system);

// A chat's next prompt: `history` (ending in the user's newest turn) rendered with make_chat_prompt;
// while the prompt leaves fewer than `room` tokens of context_limit for the answer, the oldest turns
// (after a system turn) are dropped from history. Throws DataError when the newest turn alone is too long.
ChatPrompt fit_chat_prompt(const ChatEncoder& encoder, Conversation& history, const std::string& system,
                           int context_limit, int room);

}  // namespace shardft
