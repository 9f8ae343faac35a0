#include "parallel/zero/step_protocol.hpp"

#include <stdexcept>
#include <string>

namespace shardft {

const char* step_phase_name(StepPhase phase) {
  switch (phase) {
    case StepPhase::idle: return "idle (no step open)";
    case StepPhase::accumulating: return "accumulating (between micro-batches)";
    case StepPhase::micro_batch: return "micro_batch (inside a micro-batch)";
    case StepPhase::reduced: return "reduced (the step's gradient is complete)";
  }
  return "unknown";
}

void StepProtocol::begin_step() {
  phase_ = StepPhase::accumulating;
  next_index_ = 0;
}

void StepProtocol::begin_micro_batch(MicroBatch mb) {
  expect(StepPhase::accumulating, "begin_micro_batch");
  if (mb.count < 1 || mb.index < 0 || mb.index >= mb.count) {
    throw std::logic_error("begin_micro_batch: micro-batch " + std::to_string(mb.index) + " of " +
                           std::to_string(mb.count) + " is out of range");
  }
  if (mb.index != next_index_ || (mb.index > 0 && mb.count != micro_.count)) {
    throw std::logic_error("begin_micro_batch: micro-batch " + std::to_string(mb.index) + " of " +
                           std::to_string(mb.count) + " where micro-batch " + std::to_string(next_index_) + " of " +
                           std::to_string(next_index_ == 0 ? mb.count : micro_.count) + " comes next");
  }
  micro_ = mb;
  phase_ = StepPhase::micro_batch;
}

void StepProtocol::end_micro_batch() {
  expect(StepPhase::micro_batch, "end_micro_batch");
  next_index_ = micro_.index + 1;
  phase_ = micro_.last() ? StepPhase::reduced : StepPhase::accumulating;
}

void StepProtocol::end_step() {
  expect(StepPhase::reduced, "optimizer_step");
  phase_ = StepPhase::idle;
}

void StepProtocol::reset() {
  phase_ = StepPhase::idle;
  next_index_ = 0;
}

void StepProtocol::expect(StepPhase want, const char* call) const {
  if (phase_ == want) return;
  throw std::logic_error(std::string(call) + " called in step phase " + step_phase_name(phase_) + "; it belongs to " +
                         step_phase_name(want));
}

}  // namespace shardft
