#pragma once
// The files of a sharded checkpoint as a reader checks them (src/train/checkpoint.cpp writes them):
// metadata.json with its seal, and each rank file's datasets against it.
//
// The seal is a digest of metadata.json's own content, so one flipped bit or a hand edit (say "step": 30
// -> 20) makes the checkpoint damaged instead of silently wrong. XXH3-64 like the dataset checksums (FNV-1a
// 64 before format 3): it guards against damage and accidents, not against someone who recomputes it on
// purpose. Each rank
// file also carries the format, step, world size and a fingerprint of the parameter layout as attributes
// of every dataset, so metadata.json and the rank files must agree with each other too.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "io/digest64.hpp"

namespace shardft {

// Format 3: as format 2, with XXH3-64 digests (seal, adapter files, dataset checksums; io/digest64.hpp),
// and each rank file's whole-file digest in metadata.json ("files"[i]."digest").
inline constexpr const char* kCheckpointFormat = "shardft-checkpoint-3";
// Format 2: sealed metadata.json, rank files carry format/step/world_size/layout attributes; FNV-1a 64
// digests. Still read and verified as written.
inline constexpr const char* kCheckpointFormatV2 = "shardft-checkpoint-2";
// Format 1 (before the seal): still read, with a warning, and its rank files' step and world size
// attributes (which format 1 wrote too) are still cross-checked. The format field is what tells the
// two apart; rank files of format 2 carry it as well, so a format-2 checkpoint edited to claim format 1
// is caught.
inline constexpr const char* kCheckpointFormatV1 = "shardft-checkpoint-1";

// The datasets of a rank file: fp32 master weights, both AdamW moments, and the slice table.
inline constexpr const char* kCheckpointDatasets[] = {"master", "exp_avg", "exp_avg_sq", "slices"};

struct CheckpointMeta {
  nlohmann::json json;
  std::string dir;       // the checkpoint directory
  std::string path;      // its metadata.json
  bool sealed = false;   // formats 2 and 3
  std::string format;    // its "format"
  std::string warning;   // non-empty for a format-1 checkpoint: say it on the log
  std::string layout;    // layout_fingerprint of its parameter table
};

// "xxh3_64:<16 hex digits>" (format 2: "fnv1a64:...", as meta's "format" says) over the compact dump of
// `meta` without its "seal" field (nlohmann's objects keep their keys sorted, so the dump is canonical:
// indentation does not count).
std::string metadata_digest(const nlohmann::json& meta);
// Sets meta["seal"] to metadata_digest(meta).
void seal_metadata(nlohmann::json& meta);
// A digest of the parameter table (name, shape, layout offset of each) and the total element count
// (FNV-1a 64 in every format: it names the layout, checkpoints of every format compare against it).
std::string layout_fingerprint(const nlohmann::json& params, std::int64_t total_numel);

// Parses metadata.json's text and checks its format, its seal and the type of every field a reader uses.
// FormatError "DIR/metadata.json: ..." naming the field.
CheckpointMeta parse_checkpoint_meta(const std::string& text, const std::string& dir);
// Reads DIR/metadata.json with parse_checkpoint_meta. FormatError when it is missing.
CheckpointMeta read_checkpoint_meta(const std::string& dir);

// "<algorithm>:<16 hex digits>" over a file's bytes (read in bounded chunks). FormatError when it cannot be read.
std::string file_digest(const std::string& path, DigestAlgorithm algorithm = DigestAlgorithm::xxh3_64);
// A LoRA checkpoint's PEFT files (adapter_model.safetensors, adapter_config.json): what the merge,
// generate and inspect commands read as the trained adapter. The save records each one's digest in
// metadata.json's "adapter_files" (under the seal); verify_adapter_files checks them (FormatError
// "DIR/FILE: ..." when one was changed, damaged or removed). A checkpoint written before the digests
// has adapter files but no "adapter_files": read_checkpoint_meta says so in its warning.
nlohmann::json adapter_file_digests(const std::string& dir);
void verify_adapter_files(const CheckpointMeta& meta);

// Verifies rank file json["files"][index]: its whole-file digest (format 3, before HDF5 opens it) or every
// dataset's checksum (older formats), read in bounded chunks; that its attributes agree with the metadata
// (format, step, world size, layout) and that its slice table is the metadata's. FormatError
// "DIR/rank-0000R.h5: ..." naming the dataset where one is at fault.
void verify_rank_file(const CheckpointMeta& meta, std::size_t index);
// Every rank file of the checkpoint, and its adapter files (verify_adapter_files).
void verify_checkpoint_files(const CheckpointMeta& meta);

}  // namespace shardft
