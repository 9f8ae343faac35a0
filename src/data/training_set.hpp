#pragma once
// The tokenized training set of a recipe, and its on-disk cache.
//
// Reading, mixing and tokenizing a large dataset costs minutes; the result is stored as HDF5 in
// `dataset_cache_dir` under a key made of everything that decides it (the content of every dataset
// file, the weights and seed of the mixture, the dataset options, the tokenizer's fingerprint, the
// chat template, max_seq_length, packing), and reused by any later run with the same key. A cache file
// that cannot be read (damaged, truncated, another format version) is ignored and rewritten.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "config/config_error.hpp"
#include "config/data_sections.hpp"
#include "data/chat_template.hpp"
#include "data/datasets.hpp"
#include "data/sft_data.hpp"

namespace shardft {

struct TrainingSet {
  std::vector<TokenizedSample> samples;
  std::vector<std::vector<std::int64_t>> rows;  // packing: sample indices per row; empty otherwise
  std::vector<TokenizedSample> held_out;        // val_set_size: the eval split, never trained on
  std::string report;                           // what reading the data logged (per-file counts)
  bool from_cache = false;
  std::string cache_path;                       // "" when caching is off
};

// Everything that decides the tokenized set, one "key: value" per line; file contents enter as hashes.
std::string training_set_settings(const TrainingSetConfig& cfg, const ChatEncoder& encoder,
                                  const std::string& tokenizer_fingerprint);

// cache_dir/tokenized-<16 hex digits of the settings' hash>.h5
std::string training_set_cache_path(const std::string& cache_dir, const std::string& settings);

// The set from the cache when a file with these exact settings is there; else read, tokenized (with
// progress lines on `log` for sets that take a while) and packed, then written to the cache when
// `write_cache` (one rank writes; a write goes through a temporary file renamed into place).
TrainingSet build_training_set(const TrainingSetConfig& cfg, const ChatEncoder& encoder, const std::string& tokenizer_fingerprint,
                               bool write_cache, std::ostream& log);

// Which tokens of a sample take loss: assistant_only_loss for conversations, completion_only_loss for
// prompt / completion records (trl's switches).
LossOn loss_on(const LossSwitches& loss, bool prompt_completion);

// val_set_size (axolotl's meaning): moves ceil(fraction x n) samples (size < 1) or `size` samples (size >= 1),
// drawn by the seed, out of `samples`; both parts keep their original order. DataError naming val_set_size
// when either part would be empty.
std::vector<TokenizedSample> split_held_out(std::vector<TokenizedSample>& samples, double size, std::uint64_t seed);

// DataError when no sample has a target token (training would run with loss 0 and change nothing).
void check_training_targets(const std::vector<TokenizedSample>& samples, int max_seq_length);
// The same for the evaluation set read from `eval_path`, as the encoder tokenizes it (its eval_loss
// would read 0).
void check_eval_targets(const std::vector<Conversation>& eval_set, const ChatEncoder& encoder, int max_seq_length,
                        const std::string& eval_path);

// The cache file itself. read: false when the file is absent, unreadable or made with other settings.
bool read_training_set_cache(const std::string& path, const std::string& settings, TrainingSet& out);
void write_training_set_cache(const std::string& path, const std::string& settings, const TrainingSet& set);

}  // namespace shardft
