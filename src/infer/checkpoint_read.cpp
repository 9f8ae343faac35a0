#include "infer/checkpoint_read.hpp"

#include <algorithm>
#include <memory>
#include <utility>

#include "io/checkpoint_meta.hpp"
#include "io/hdf5_shard.hpp"

namespace shardft {

CheckpointMasterReader::CheckpointMasterReader(std::string dir, const nlohmann::json& meta)
    : dir_(std::move(dir)), files_(meta.at("files")) {}

CheckpointMasterReader::~CheckpointMasterReader() = default;

void CheckpointMasterReader::read(std::int64_t lo, std::int64_t n, float* out) {
  std::int64_t covered = 0;
  for (std::size_t f = 0; f < files_.size(); ++f) {
    const auto t = files_[f].at("slices").get<std::vector<std::int64_t>>();
    for (std::size_t i = 0; i + 2 < t.size(); i += 3) {
      const std::int64_t b = std::max(lo, t[i]), e = std::min(lo + n, t[i] + t[i + 2]);
      if (b >= e) continue;
      reader(f).read_f32("master", static_cast<std::size_t>(t[i + 1] + (b - t[i])), static_cast<std::size_t>(e - b),
                         out + (b - lo));
      covered += e - b;
    }
  }
  if (covered != n) throw FormatError(dir_ + ": elements " + std::to_string(lo) + ".." + std::to_string(lo + n) + " are in no rank file");
}

Hdf5ShardReader& CheckpointMasterReader::reader(std::size_t f) {
  if (readers_.size() <= f) readers_.resize(files_.size());
  if (!readers_[f]) readers_[f] = std::make_unique<Hdf5ShardReader>(dir_ + "/" + files_[f].at("file").get<std::string>());
  return *readers_[f];
}

nlohmann::json read_checkpoint_metadata(const std::string& checkpoint_dir) {
  return read_checkpoint_meta(checkpoint_dir).json;
}

void check_checkpoint_layout(const nlohmann::json& meta, const ParamLayout& layout, const std::string& meta_path) {
  const auto& params = meta.at("params");
  if (meta.at("total_numel").get<std::int64_t>() != layout.total_numel() || params.size() != layout.params().size()) {
    throw FormatError(meta_path + ": its parameter table does not match its model " + meta.at("model").dump());
  }
  for (std::size_t p = 0; p < params.size(); ++p) {
    const ParamSpec& spec = layout.params()[p];
    if (params[p].at("name") != spec.name || params[p].at("shape").get<std::vector<std::int64_t>>() != spec.shape ||
        params[p].at("layout_offset").get<std::int64_t>() != layout.offset(static_cast<int>(p))) {
      throw FormatError(meta_path + ": parameter '" + params[p].at("name").get<std::string>() +
                        "' is not where the model " + meta.at("model").dump() + " has it");
    }
  }
}

nlohmann::json verify_checkpoint_for_reading(const std::string& checkpoint_dir, std::ostream& log) {
  CheckpointMeta meta = read_checkpoint_meta(checkpoint_dir);
  if (!meta.warning.empty()) log << "warning: " << meta.warning << std::endl;
  // All rank files, all datasets, though a reader here uses only the master weights: a damaged moment
  // means the save went wrong, and nothing from such a checkpoint should be trusted.
  verify_checkpoint_files(meta);
  return std::move(meta.json);
}

void read_checkpoint_master(const std::string& checkpoint_dir, const nlohmann::json& meta, std::int64_t lo,
                            std::int64_t n, float* out) {
  CheckpointMasterReader(checkpoint_dir, meta).read(lo, n, out);
}

void read_checkpoint_weights(const std::string& dir, const ParamLayout& layout, float* flat, std::ostream& log) {
  const nlohmann::json meta = verify_checkpoint_for_reading(dir, log);
  check_checkpoint_layout(meta, layout, dir + "/metadata.json");
  read_checkpoint_master(dir, meta, 0, layout.total_numel(), flat);
  log << "the master weights of checkpoint " << dir << " (step " << meta.at("step") << ")" << std::endl;
}

}  // namespace shardft
