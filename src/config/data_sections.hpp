#pragma once
// The data pipeline's sections of the recipe, built by config/recipe_sections.hpp: how dataset files are
// read (data/datasets.hpp), what the tokenized training set depends on (data/training_set.hpp) and how
// the sampler walks it (data/sampler.hpp).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/data_keys.hpp"

namespace shardft {

// How dataset files are read (dataset_text_field, role_map, skip_bad_samples): training and eval alike.
struct DatasetOptions {
  std::string text_field = "text";
  std::map<std::string, std::string> role_map;  // dataset role -> system | user | assistant
  bool skip_bad_samples = false;
  // false: prompts to generate from (`shardft generate --prompts_file`): a conversation needs no
  // assistant turn, and {"prompt": ...} needs no "completion".
  bool require_assistant = true;
};

// trl's loss switches: which tokens of a sample take loss (loss_on).
struct LossSwitches {
  bool assistant_only = true;   // assistant_only_loss, for conversations
  bool completion_only = true;  // completion_only_loss, for prompt / completion records
};

// Everything the tokenized training set depends on, resolved once, so that reading, mixing, tokenizing,
// splitting and packing never see the whole recipe.
struct TrainingSetConfig {
  std::vector<DatasetSpec> datasets;  // dataset_path or datasets, with their weights
  DatasetOptions options;             // dataset_text_field, role_map, skip_bad_samples
  std::string role_map;               // as the recipe wrote it: a line of the cache key
  std::uint64_t seed = 0;             // data_order_seed: the mixture's draw and the held-out split
  int max_seq_length = 0;
  bool packing = false;
  std::string packing_strategy;
  double val_set_size = 0;
  LossSwitches loss;
  std::string cache_dir;              // dataset_cache_dir; empty: no cache
};

// The recipe's sampling settings, resolved once: all the sampler, the step plan and
// the batch source read.
struct SamplerConfig {
  int per_device_train_batch_size = 1;
  int gradient_accumulation_steps = 1;
  long train_batch_size = 0;     // > 0: the global batch the recipe asks for, checked against the plan
  long max_steps = 0;            // > 0 wins over num_train_epochs
  double num_train_epochs = 1;
  bool packing = false;          // units are packed rows, not samples
  std::uint64_t order_seed = 0;  // the epochs' order (data_seed, else seed)
  std::string data_name;         // what the training data is called in messages
};

}  // namespace shardft
