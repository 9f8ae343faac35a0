// The ParamSource side of ZeroEngine: a block's weights from the frozen store and the trainable one,
// and the progress calls that keep nonblocking collectives moving while the model computes.
#include "parallel/zero_engine.hpp"

namespace shardft {

void ZeroEngine::acquire(int block, Pass pass) {
  progress();
  // An overlapped update: the block's units are ready once their update is (the others may still run).
  for (int unit : part_.units_of_block(block)) optimizer_->wait_for_unit(unit);
  frozen_->acquire(block, pass);
  weights_->acquire(block, pass);
}

void ZeroEngine::release(int block, Pass pass) {
  progress();
  frozen_->release(block, pass);
  weights_->release(block, pass);
}

Unmanaged1<const float> ZeroEngine::weight(int param) {
  progress();
  if (!holds(param)) return frozen_->weight(param);
  return weights_->weight(param);
}

Unmanaged1<const bf16> ZeroEngine::weight_bf16(int param) {
  progress();
  if (!holds(param)) return frozen_->weight_bf16(param);
  return weights_->weight_bf16(param);
}

// Nonblocking collectives advance only inside MPI calls: one test per engine call during compute.
void ZeroEngine::progress() {
  frozen_->progress();
  reducer_->progress();
  weights_->progress();
}

void ZeroEngine::drain_gathers() {
  frozen_->drain();
  weights_->drain();
}

}  // namespace shardft
