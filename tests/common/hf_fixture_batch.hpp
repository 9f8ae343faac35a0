#pragma once
// The fixed batches of tests/reference/hf/batch.json (made by make_hf_models.py) as TokenBatches.
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/sft_data.hpp"

namespace shardft {
namespace testing_util {

inline const std::string& hf_fixture_dir() {
  static const std::string dir = std::string(SHARDFT_REFERENCE_DIR) + "/hf";
  return dir;
}

// The fixture entry of one model: input_ids, attention_mask, labels, loss (transformers', fp32).
inline nlohmann::json hf_fixture(const std::string& model) {
  std::ifstream in(hf_fixture_dir() + "/batch.json");
  return nlohmann::json::parse(in).at(model);
}

// HF's labels are unshifted (the model shifts them); ours are: targets[t] = labels[t + 1].
inline TokenBatch hf_fixture_batch(const nlohmann::json& fx) {
  TokenBatch b;
  const auto ids = fx.at("input_ids").get<std::vector<std::vector<std::int32_t>>>();
  const auto labels = fx.at("labels").get<std::vector<std::vector<std::int32_t>>>();
  b.batch = static_cast<int>(ids.size());
  b.seq = static_cast<int>(ids[0].size());
  for (int r = 0; r < b.batch; ++r) {
    for (int t = 0; t < b.seq; ++t) {
      b.input_ids.push_back(ids[r][t]);
      b.position_ids.push_back(t);
      b.seq_ids.push_back(0);
      b.targets.push_back(t + 1 < b.seq ? labels[r][t + 1] : -100);
    }
  }
  b.real_tokens = static_cast<std::int64_t>(b.input_ids.size());
  return b;
}

}  // namespace testing_util
}  // namespace shardft
