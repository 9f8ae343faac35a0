#pragma once
// The training loop's stop-signal check: after each optimizer step the ranks agree on whether any of
// them got a stop signal (train/stop_signal.hpp); then every rank stops at that step, after its
// checkpoint.
#include <ostream>

#include "comm/communicator.hpp"
#include "io/progress_bar.hpp"

namespace shardft {

class StopCheck {
 public:
  // host_world: the group the ranks agree over (host buffers); it must outlive the check.
  explicit StopCheck(Communicator& host_world) : host_world_(host_world) {}

  // Collective. Whether a signal on any rank (SLURM's --signal, a scheduler's SIGTERM, Ctrl-C) stops the
  // run after step `step` (1-based); if so says so on `log` (the progress bar cleared first).
  bool after_step(long step, std::ostream& log, ProgressBar* bar);

  // The run's last line when it stopped after step `step`.
  void report_stopped(long step, std::ostream& log) const;

  int signal() const { return signal_; }  // the agreed signal; 0 while none

 private:
  Communicator& host_world_;
  int signal_ = 0;
};

}  // namespace shardft
