#pragma once
// A run's own recipe, as its checkpoints carry it (metadata.json's "config"), under the recipe of a
// command that opens the run (generate, chat, eval): the keys the run knows better than the defaults.
#include <string>

#include <nlohmann/json.hpp>

#include "config/train_config.hpp"

namespace shardft {

// tokenizer_name_or_path (unless skip_tokenizer), chat_template, max_seq_length, bf16 and dataset_text_field
// from `meta`'s saved recipe, each where `cfg` left it at its default, with meta_path as its source.
// FormatError naming meta_path when the saved recipe is not readable YAML.
void apply_run_recipe(TrainConfig& cfg, const nlohmann::json& meta, const std::string& meta_path, bool skip_tokenizer);

}  // namespace shardft
