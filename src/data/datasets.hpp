#pragma once
// Dataset files in the formats trl accepts, and several of them mixed by weight.
//
// A file is JSON Lines (one record per line; blank lines skipped) or, when its first non-space
// character is '[', one JSON array of records. A record is an object in one of these formats
// (extra fields are ignored; the first format whose key is present wins):
//   {"conversations": [{"from": "human"|"gpt"|"system"|..., "value": "..."}, ...]}     (ShareGPT)
//   {"messages": [{"role": "user"|"assistant"|"system"|..., "content": "..."}, ...]}
//   {"prompt": "...", "completion": "..."}            a user turn, then the assistant's; or both as
//                                                     message lists (trl's conversational prompt-completion)
//   {"text": "..."}                                   plain text (the field named by dataset_text_field);
//                                                     every token takes loss, closed by end-of-text
// Roles: human/user -> user, gpt/assistant -> assistant, system -> system; others through the
// recipe's role_map, else an error. A conversation needs at least one assistant turn.
//
// Every rejection is a DataError "path:line: reason" (JSON arrays: "path:line: record[i]: reason",
// i counting from 0); with skip_bad_samples the record is skipped and counted instead, and a file
// whose every record is bad is still an error.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/data_keys.hpp"
#include "config/data_sections.hpp"
#include "config/config_error.hpp"
#include "data/sft_data.hpp"

namespace shardft {

// What reading one file found.
struct DatasetFileReport {
  static constexpr std::size_t kReasonsKept = 5;
  std::string path;
  std::int64_t records = 0;               // non-blank records seen
  std::int64_t skipped = 0;               // bad ones skipped (skip_bad_samples)
  std::vector<std::string> skip_reasons;  // the first kReasonsKept, "path:line: reason"
  std::vector<char> prompt_completion;    // per sample read: 1 where the record was a prompt / completion pair
  std::int64_t samples() const { return records - skipped; }
};

std::vector<Conversation> read_dataset(const std::string& path, const DatasetOptions& options,
                                       DatasetFileReport* report = nullptr);
// The same for a file's content already in memory; `path` names it in messages.
std::vector<Conversation> read_dataset_text(const std::string& path, const std::string& text,
                                            const DatasetOptions& options, DatasetFileReport* report = nullptr);

// Several files mixed into one training set, drawn once per run (every epoch then shuffles the same
// set). A file of n good samples with weight w contributes round(n * w) samples: each of its samples
// floor(round(n*w) / n) times, plus the remaining round(n*w) mod n samples picked without repetition
// by a permutation seeded with (seed, file index), kept in file order. Weight 1 is the file as it is;
// 0.5 half of it, 2.0 every sample twice, 1.5 every sample once and half of them twice. A weight that
// leaves a file with no sample at all is an error. The mixed set lists the files in order.
struct MixedDataset {
  struct Part {
    DatasetSpec spec;
    DatasetFileReport file;
    std::int64_t used = 0;  // samples this file put into the mixed set
  };
  std::vector<Conversation> samples;
  std::vector<char> prompt_completion;  // per sample: from a prompt / completion record
  std::vector<Part> parts;
};
MixedDataset mix_datasets(const std::vector<DatasetSpec>& specs, const DatasetOptions& options, std::uint64_t seed);

// Log lines (each ending in '\n'): per file "dataset PATH: R records, S samples[, K skipped]; weight W
// -> U samples", then per skipping file "  skipped: <first reasons>", then the total.
std::string describe_mixture(const MixedDataset& mixed);
// The skip lines of one file ("" when nothing was skipped), for the eval set.
std::string describe_skips(const DatasetFileReport& report);

}  // namespace shardft
