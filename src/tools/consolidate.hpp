#pragma once
// `shardft consolidate` and `shardft inspect`. From a sharded checkpoint to what transformers loads:
// model.safetensors (or numbered shards plus model.safetensors.index.json past max_shard_bytes) and
// config.json. Streams tensor by tensor: each tensor is assembled from the rank files' slices (reading
// them: infer/checkpoint_read.hpp), converted and written, so peak memory is about the largest tensor,
// never the model.
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.hpp"
#include "io/safetensors_shards.hpp"

namespace shardft {

struct ConsolidateOptions {
  std::string output_dir;
  TensorDtype dtype = TensorDtype::F32;
  std::uint64_t max_shard_bytes = 5000000000ull;  // HF's default "5GB"
};

using ConsolidateReport = SafetensorsShardsReport;

// Writes `tensors` in order as model.safetensors, or numbered shards under opt.max_shard_bytes plus
// model.safetensors.index.json, in opt.dtype; fill(i, out) puts tensor i's fp32 values in `out`.
inline ConsolidateReport write_safetensors_shards(const std::string& output_dir, const std::vector<TensorEntry>& tensors,
                                                  const ConsolidateOptions& opt,
                                                  const std::function<void(std::size_t, float*)>& fill) {
  return write_safetensors_shards(output_dir, tensors, opt.dtype, opt.max_shard_bytes, fill);
}

// Verifies the whole checkpoint first (verify_checkpoint_for_reading): a damaged one exports nothing.
// A LoRA checkpoint holds no base weights: FormatError pointing at --merge_adapters (tools/merge_adapters.hpp).
ConsolidateReport consolidate_checkpoint(const std::string& checkpoint_dir, const ConsolidateOptions& opt,
                                         std::ostream& log);

// What the checkpoint holds, with every dataset's checksum verified; FormatError on the first problem.
std::string inspect_checkpoint(const std::string& checkpoint_dir);

}  // namespace shardft
