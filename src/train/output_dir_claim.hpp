#pragma once
// One run per output_dir, also over time. A fresh run (no resume_from_checkpoint) into a folder that an
// earlier run left checkpoints, `latest` or metrics.jsonl in would mix with it: rotation would delete the
// new run's checkpoints in favour of the old ones' higher step numbers, and `resume_from_checkpoint: true`
// would take the other run's. So such a run stops at start, on every rank, with ConfigError (exit 2)
// naming what is there and the ways on; with overwrite_output_dir (HF's key) those files are removed
// first, each named on the log.
//
// Every run has an id, written into each of its checkpoints' metadata ("run_id"): a resumed run keeps the
// id of the checkpoint it resumed, and rotation (save_total_limit) deletes only checkpoints of its own id.
#include <ostream>
#include <string>

#include "comm/communicator.hpp"

namespace shardft {

// Collective over `world` (host buffers); call it holding the output_dir lock (train/output_lock.hpp).
// Rank 0 looks and clears; its ConfigError is thrown on every rank. `resumed_run_id` null: a fresh run,
// which needs a folder without an earlier run's files; else the id of the run being resumed, which may
// find its own checkpoints, `latest` and metrics there but no other run's checkpoints (their step numbers
// would collide with its own).
// The recipe's output_dir keys (HF's names).
struct OutputDirConfig {
  std::string output_dir;
  bool overwrite_output_dir = false;
  std::string resume_from_checkpoint;  // "": a fresh run; "true": the newest good checkpoint; or a path
};
void claim_output_dir(const OutputDirConfig& cfg, Communicator& world, std::ostream& log,
                      const std::string* resumed_run_id = nullptr);

// Collective: a new run id, drawn by rank 0 (16 hex digits).
std::string new_run_id(Communicator& world);

}  // namespace shardft
