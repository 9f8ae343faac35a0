#pragma once
// The fixed batches of tests/reference/hf/batch.json (made by make_hf_models.py) and batch_grads.json
// (make_hf_head_dim_models.py, with transformers' gradients) as TokenBatches.
#include <fstream>
#include <stdexcept>
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

// The fixture entry of one model: input_ids, attention_mask, labels, loss (transformers', fp32), and in
// batch_grads.json also grads (hf_fixture_grads.hpp).
inline nlohmann::json hf_fixture(const std::string& model) {
  for (const char* file : {"/batch.json", "/batch_grads.json"}) {
    std::ifstream in(hf_fixture_dir() + file);
    const nlohmann::json all = nlohmann::json::parse(in);
    if (all.contains(model)) return all.at(model);
  }
  throw std::out_of_range("no fixture batch for " + model + " in " + hf_fixture_dir());
}

// HF's labels are unshifted (the model shifts them); ours are: targets[t] = labels[t + 1]. Rows
// [first_row, first_row + rows) of the batch; rows -1: to the last.
inline TokenBatch hf_fixture_batch(const nlohmann::json& fx, int first_row = 0, int rows = -1) {
  TokenBatch b;
  const auto ids = fx.at("input_ids").get<std::vector<std::vector<std::int32_t>>>();
  const auto labels = fx.at("labels").get<std::vector<std::vector<std::int32_t>>>();
  b.batch = rows < 0 ? static_cast<int>(ids.size()) - first_row : rows;
  b.seq = static_cast<int>(ids[0].size());
  for (int r = first_row; r < first_row + b.batch; ++r) {
    for (int t = 0; t < b.seq; ++t) {
      b.input_ids.push_back(ids[r][t]);
      b.position_ids.push_back(t);
      b.seq_ids.push_back(0);
      b.sample_ids.push_back(r);  // the row is the sample
      b.targets.push_back(t + 1 < b.seq ? labels[r][t + 1] : -100);
    }
  }
  b.real_tokens = static_cast<std::int64_t>(b.input_ids.size());
  return b;
}

}  // namespace testing_util
}  // namespace shardft
