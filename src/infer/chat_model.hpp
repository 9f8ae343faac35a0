#pragma once
// Opening a model directory to talk to (`shardft generate`, evaluation of a saved model), and turning
// a conversation into the prompt the model continues.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "config/train_config.hpp"
#include "data/chat_template.hpp"
#include "model/decoder.hpp"
#include "model/param_source.hpp"

namespace shardft {

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
