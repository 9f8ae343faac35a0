#pragma once
// Reading a sharded checkpoint back: its metadata.json checked, every rank file verified, and the fp32
// master weights assembled in layout order from the rank files' slices (resume's weights, the chat
// model, and the tools that export a checkpoint).
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/param_layout.hpp"

namespace shardft {

class Hdf5ShardReader;

// Assembles elements [lo, lo + n) of the master weights in layout order from the rank files' slices,
// each rank file opened once, when first needed. FormatError when an element is in no rank file.
class CheckpointMasterReader {
 public:
  CheckpointMasterReader(std::string dir, const nlohmann::json& meta);
  ~CheckpointMasterReader();
  void read(std::int64_t lo, std::int64_t n, float* out);

 private:
  Hdf5ShardReader& reader(std::size_t f);
  std::string dir_;
  nlohmann::json files_;
  std::vector<std::unique_ptr<Hdf5ShardReader>> readers_;
};

// A checkpoint directory's metadata.json, its seal and fields checked (io/checkpoint_meta.hpp);
// FormatError when it is missing, damaged or edited.
nlohmann::json read_checkpoint_metadata(const std::string& checkpoint_dir);

// Reads and checks metadata.json and verifies every rank file (checksums streamed in bounded chunks,
// attributes against the metadata) before any of it is used: FormatError naming the file and dataset.
// A format-1 checkpoint's warning goes to `log`. Returns the metadata.
nlohmann::json verify_checkpoint_for_reading(const std::string& checkpoint_dir, std::ostream& log);

// FormatError naming `meta_path` when the checkpoint's parameter table is not `layout`'s.
void check_checkpoint_layout(const nlohmann::json& meta, const ParamLayout& layout, const std::string& meta_path);

// Elements [lo, lo + n) of the checkpoint's fp32 master weights in layout order (metadata "params" gives
// each tensor's name, shape and layout_offset), assembled from the rank files' slices.
void read_checkpoint_master(const std::string& checkpoint_dir, const nlohmann::json& meta, std::int64_t lo,
                            std::int64_t n, float* out);

// verify_checkpoint_for_reading, check_checkpoint_layout, then the master weights into `flat` (layout order).
void read_checkpoint_weights(const std::string& dir, const ParamLayout& layout, float* flat, std::ostream& log);

}  // namespace shardft
