#pragma once
// An HF model's weight files, as save_pretrained writes them: model.safetensors, or past max_shard_bytes
// numbered shards (model-00001-of-00003.safetensors, ...) with model.safetensors.index.json. Tensors
// arrive one at a time in the declared order (push: write_next; pull: write_safetensors_shards), so
// memory holds the tensor being written, never the model.
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.hpp"

namespace shardft {

struct SafetensorsShardsReport {
  int files = 0;
  std::uint64_t bytes = 0;
  std::int64_t largest_tensor = 0;  // elements
  std::int64_t tensors = 0;
  // Weight files of an earlier export in the folder that this one did not write (shards, an index),
  // removed as HF's save_pretrained removes them: a loader would otherwise prefer the stale index or
  // mix stale shards in.
  std::vector<std::string> removed;
};

class SafetensorsShardsWriter {
 public:
  // Shards in order, each under max_shard_bytes (a tensor larger than that gets a shard of its own).
  SafetensorsShardsWriter(std::string output_dir, std::vector<TensorEntry> tensors, TensorDtype dtype,
                          std::uint64_t max_shard_bytes);
  ~SafetensorsShardsWriter();
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  // The next tensor's fp32 values, converted to the dtype; a shard is complete (renamed into place) with
  // its last tensor.
  void write_next(const float* values);
  // Every tensor written: the index (when sharded), stale weight files removed; the report.
  SafetensorsShardsReport finish();

 private:
  std::string dir_;
  std::vector<TensorEntry> tensors_;
  TensorDtype dtype_;
  std::vector<std::pair<std::size_t, std::size_t>> shards_;  // [first, last) tensor of each file
  std::size_t next_ = 0, shard_ = 0;
  std::unique_ptr<SafetensorsStreamWriter> file_;
  std::set<std::string> written_;
  nlohmann::json weight_map_ = nlohmann::json::object();
  SafetensorsShardsReport rep_;
};

// Pull form: fill(i, out) puts tensor i's fp32 values in `out` (a buffer of the largest tensor's size).
SafetensorsShardsReport write_safetensors_shards(const std::string& output_dir, const std::vector<TensorEntry>& tensors,
                                                 TensorDtype dtype, std::uint64_t max_shard_bytes,
                                                 const std::function<void(std::size_t, float*)>& fill);

}  // namespace shardft
