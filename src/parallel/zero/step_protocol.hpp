#pragma once
// The order of an optimizer step's calls into the sharding engine, as a named phase that each call
// enters explicitly (PyTorch FSDP2's TrainingState): begin_step, then for each micro-batch
// begin_micro_batch({index, count}) / the model's forward and backward / end_micro_batch, then the
// gradient's readers (clip, scale) and the optimizer step. The engine never infers where it is from
// the order of other calls; a call made in the wrong phase is a logic_error that names the call and
// the phase, before anything is communicated.

namespace shardft {

// Which micro-batch of the step the model is about to run: index in [0, count).
struct MicroBatch {
  int index = 0, count = 1;
  bool last() const { return index + 1 == count; }
};

enum class StepPhase {
  idle,          // no step open: before the first, after an optimizer step or a restore
  accumulating,  // a step is open, between micro-batches (its gradient is partial)
  micro_batch,   // inside a micro-batch: the model hands gradients over block by block
  reduced,       // every micro-batch done and reduced: the gradient is the step's
};

const char* step_phase_name(StepPhase phase);

class StepProtocol {
 public:
  // Any phase -> accumulating; a step left open (an error escaped it) is abandoned.
  void begin_step();
  // accumulating -> micro_batch, for micro-batches 0, 1, ..., count - 1 of one count, in order.
  void begin_micro_batch(MicroBatch mb);
  // micro_batch -> accumulating, or reduced after the last micro-batch.
  void end_micro_batch();
  // reduced -> idle.
  void end_step();
  // Anything -> idle (the state was replaced: a checkpoint restored).
  void reset();
  // Throws unless the phase is `want`; `call` names the caller in the message.
  void expect(StepPhase want, const char* call) const;

  StepPhase phase() const { return phase_; }
  const MicroBatch& micro_batch() const { return micro_; }

 private:
  StepPhase phase_ = StepPhase::idle;
  MicroBatch micro_;
  int next_index_ = 0;
};

}  // namespace shardft
