#pragma once
// The recipe's structured data keys, `datasets` (a list) and `role_map` (a mapping). The recipe table
// holds them as text in one canonical form (JSON, which every YAML reader also reads), so they travel
// through YAML, --key=value flags, validation and to_yaml like every other key; these functions turn
// any accepted spelling into that form and the form back into values.
//
//   datasets: [{path: a.jsonl, weight: 2.0}, {path: b.json, weight: 0.5}, c.jsonl]
//     canonical: [{"path": "a.jsonl", "weight": 2.0}, {"path": "b.json", "weight": 0.5}, {"path": "c.jsonl", "weight": 1.0}]
//   role_map: {bot: assistant, narrator: system}
//     canonical: {"bot": "assistant", "narrator": "system"}
#include <map>
#include <string>
#include <vector>

#include "config/train_config.hpp"

namespace shardft {

// One training file of a mixture. weight: how many times each of its samples is used per epoch on
// average (see data/datasets.hpp for the exact draw); weight 1 is the file as it is.
struct DatasetSpec {
  std::string path;
  double weight = 1.0;
};

// Text (YAML flow or JSON; "" means none) -> canonical text. Throws std::invalid_argument with the
// reason ("item 2: weight must be a number > 0, got -1"); the recipe reader adds where and which key.
std::string canonical_datasets_text(const std::string& text);
std::string canonical_role_map_text(const std::string& text);

// Canonical (or any accepted) text -> values. Throw std::invalid_argument like the above.
std::vector<DatasetSpec> parse_datasets_text(const std::string& text);
std::map<std::string, std::string> parse_role_map_text(const std::string& text);

// The files a run trains on: `datasets` when it is set, otherwise dataset_path with weight 1.
std::vector<DatasetSpec> training_datasets(const TrainConfig& cfg);
// The recipe's role_map (empty when unset).
std::map<std::string, std::string> role_map_of(const TrainConfig& cfg);

}  // namespace shardft
