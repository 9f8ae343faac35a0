#pragma once
// Sharded training checkpoints: output_dir/checkpoint-N/ holds one HDF5 file per writing rank (its
// owned slice of the fp32 master weights and both AdamW moments, with the slice table in layout
// coordinates) and metadata.json (step, layout, config, every file's slices and checksums).
// Saving is atomic: everything goes to checkpoint-N.tmp/, each file is fsynced, rank 0 writes the
// metadata last, renames the directory and then updates `latest`. A crash at any moment leaves the
// previous checkpoint intact. Loading works at any world size, stage or hybrid layout: each rank
// reads only the element ranges it now owns.
#include <ostream>
#include <string>

#include "comm/communicator.hpp"
#include "config/train_config.hpp"
#include "train/trainer.hpp"

namespace shardft {

struct CheckpointState {
  long step = 0;             // optimizer steps done
  double train_loss_sum = 0; // sum of step losses so far (for the run's train_loss)
};

// Collective over the trainer's world (its parallel plan's). Returns the checkpoint directory.
std::string save_checkpoint(const TrainConfig& cfg, Trainer& tr, const CheckpointState& state);

// Whether save_strategy asks for a checkpoint after step `step` (1-based) of total_steps: steps: every
// save_steps and the last; epoch: each epoch's last step and the last; no: never (a preempted run
// saves regardless).
bool checkpoint_due(const TrainConfig& cfg, long step, long steps_per_epoch, long total_steps);

// Collective. Fills the trainer's engine from `dir` and returns the saved state. FormatError naming the
// file and dataset when anything is missing, truncated, damaged or from another model.
CheckpointState load_checkpoint(const std::string& dir, Trainer& tr);

// "true": the newest checkpoint in output_dir that verifies (a damaged newest one is reported on `log`
// and skipped); otherwise the path itself. Throws ConfigError when there is none.
std::string resolve_checkpoint(const TrainConfig& cfg, std::ostream& log);

// Reads every dataset of every file and checks its checksum; FormatError on the first problem.
void verify_checkpoint(const std::string& dir);

}  // namespace shardft
