#pragma once
// Sharded training checkpoints: output_dir/checkpoint-N/ holds one HDF5 file per writing rank (its
// owned slice of the fp32 master weights and both AdamW moments, with the slice table in layout
// coordinates) and metadata.json (step, layout, config, every file's slices and checksums).
// Saving is atomic: everything goes to checkpoint-N.tmp/, each file is fsynced, rank 0 writes the
// metadata last (sealed: io/checkpoint_meta.hpp), renames the directory and then updates `latest`. A crash
// at any moment leaves the previous checkpoint intact; a save that fails removes its .tmp directory and
// stops the run, and the next save removes .tmp directories a killed save left behind. Loading works at any world size, stage or hybrid layout: each rank
// reads only the element ranges it now owns.
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/communicator.hpp"
#include "config/checkpoint_section.hpp"
#include "train/output_dir_claim.hpp"
#include "train/tokenizer_export.hpp"
#include "train/trainer.hpp"

namespace shardft {

struct CheckpointState {
  CheckpointState() = default;
  CheckpointState(long step_, double train_loss_sum_, std::string run_id_)
      : step(step_), train_loss_sum(train_loss_sum_), run_id(std::move(run_id_)) {}

  long step = 0;             // optimizer steps done
  double train_loss_sum = 0; // sum of step losses so far (for the run's train_loss)
  std::string run_id;        // the run's (train/output_dir_claim.hpp); "" for checkpoints written before ids
  nlohmann::json best_model; // evaluation during training: the best so far (train/best_model.hpp); null: none
  std::string keep_checkpoint;  // save_total_limit never removes this one (the best checkpoint); "": none
};

// Collective over the trainer's world (its parallel plan's). Returns the checkpoint directory. When any
// rank fails to write, every rank throws ConfigError naming output_dir and the reason, after rank 0
// removed checkpoint-N.tmp; `latest` still names the last good checkpoint.
// Rank 0 says on `log` which leftovers of interrupted saves it removed.
// `tokenizer`: the tokenizer files, chat template and generation config the checkpoint carries (as HF's
// Trainer saves its tokenizer with each checkpoint); null: the tokenizer's files, copied.
std::string save_checkpoint(const CheckpointConfig& cfg, Trainer& tr, const CheckpointState& state,
                            std::ostream* log = nullptr, const TokenizerExport* tokenizer = nullptr);

// Whether save_strategy asks for a checkpoint after step `step` (1-based) of total_steps: steps: every
// save_steps and the last; epoch: each epoch's last step and the last; no and best: never (a preempted
// run saves regardless; best saves at an evaluation that sets a new best, train/training_eval.hpp).
bool checkpoint_due(const SaveSchedule& s, long step, long steps_per_epoch, long total_steps);

// Collective. Every rank checks metadata.json (seal, fields) and verifies each rank file it will read
// (checksums, attributes against the metadata); then the ranks agree. "" when the checkpoint is good,
// else the first failing rank's reason (naming the file and dataset), the same on every rank.
// A format-1 checkpoint's warning goes to `log`.
std::string check_checkpoint(const std::string& dir, Trainer& tr, std::ostream& log);

// Collective. check_checkpoint, then fills the trainer's engine from `dir` and returns the saved state.
// FormatError naming the checkpoint, file and dataset when anything is missing, damaged, edited or from
// another model: every rank throws it, none is left waiting.
CheckpointState load_checkpoint(const std::string& dir, Trainer& tr, std::ostream& log);

struct ResumePoint {
  std::string dir;
  CheckpointState state;
};
// Collective. resume_from_checkpoint as a path: load_checkpoint of it. "true": the newest checkpoint in
// output_dir that passes check_checkpoint; each one skipped is reported on `log` with its reason.
// ConfigError when output_dir holds no checkpoint; FormatError listing them when none verifies.
ResumePoint resume_checkpoint(const OutputDirConfig& cfg, Trainer& tr, std::ostream& log);

// Single process: metadata.json's seal and every dataset of every rank file; FormatError on the first problem.
void verify_checkpoint(const std::string& dir);

}  // namespace shardft
