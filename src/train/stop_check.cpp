#include "train/stop_check.hpp"

#include "kernels/kernel_timer.hpp"

#include "train/stop_signal.hpp"

namespace shardft {

bool StopCheck::after_step(long step, std::ostream& log, ProgressBar* bar) {
  const HostPhase phase("stop-signal check (host collective)");
  int stop = stop_signal();
  host_world_.all_reduce(&stop, &stop, 1, DType::i32, ReduceOp::max);
  signal_ = stop;
  if (signal_ == 0) return false;
  if (bar) bar->clear();
  log << stop_signal_name(signal_) << ": step " << step << " done; saving a checkpoint and stopping" << std::endl;
  return true;
}

void StopCheck::report_stopped(long step, std::ostream& log) const {
  log << "preempted: stopped after step " << step << " on " << stop_signal_name(signal_)
      << " with a checkpoint; resume with --resume_from_checkpoint true" << std::endl;
}

}  // namespace shardft
