#pragma once
// What a model directory written by a run carries for transformers besides config.json and the
// weights, so that AutoTokenizer + apply_chat_template and generate() work on it unchanged:
//   - the tokenizer's files (tokenizer.json, special_tokens_map.json), copied;
//   - tokenizer_config.json: the tokenizer's own (or a PreTrainedTokenizerFast one where it had none)
//     with chat_template set to the template the run trained with (data/chat_template_source.hpp), and
//     bos / eos / pad tokens and model_max_length where it lacked them;
//   - generation_config.json: model_name_or_path's (where it had one) with eos_token_id the ids the
//     template ends a turn and the text with (the ids generation stops at), bos and pad ids.
// The byte tokenizer has no tokenizer.json to pair a tokenizer_config.json with: only
// generation_config.json is written for it.
#include <string>

#include <nlohmann/json.hpp>

#include "config/model_config.hpp"
#include "data/chat_template.hpp"

namespace shardft {

struct TokenizerExport {
  std::string tokenizer_name_or_path;  // whose tokenizer files are copied
  nlohmann::json tokenizer_config;     // null: none written
  nlohmann::json generation_config;
};

// Where a run's tokenizer and model come from (the recipe's keys).
struct TokenizerSources {
  std::string tokenizer_name_or_path = "byte";
  std::string model_name_or_path;                                 // its generation_config.json, if any
  int model_max_length = ModelConfig{}.max_position_embeddings;  // where the tokenizer's config has none
};

// Built once at the start of a run (reads the tokenizer's and the model's configs).
TokenizerExport tokenizer_export(const TokenizerSources& cfg, const ChatEncoder& encoder);

// Writes them into `dir` (rank 0; throws std::runtime_error naming a file it cannot write).
void write_tokenizer_export(const TokenizerExport& e, const std::string& dir);

}  // namespace shardft
