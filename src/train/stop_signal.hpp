#pragma once
// Asking a training run to stop: SIGTERM (kill, scancel, a scheduler), SIGINT (Ctrl-C) and SIGUSR1
// (SLURM's --signal, jobs/mpirun.sh and train.sbatch passing a signal on) on any rank set a flag; the
// ranks agree on it after each optimizer step, save a checkpoint and exit 0 together. A second SIGINT
// while a stop is pending (Ctrl-C twice) ends the process at once with exit 130: an interrupted save
// leaves only its .tmp directory, never a damaged checkpoint. Further SIGTERM/SIGUSR1 change nothing.
#include <string>

namespace shardft {

// Installs the handlers (idempotent) and unblocks the three signals. A signal that came before still
// counts.
void install_stop_signal_handlers();
// Blocks the three signals before the process re-executes itself (an exec resets handlers to the
// default, which kills): one that arrives while the new image loads stays pending until its
// install_stop_signal_handlers, instead of ending the run with exit 143; one already caught is made
// pending again, so that the new image sees it too.
void hold_stop_signals_for_exec();
// The first stop signal this process got (SIGTERM, SIGINT or SIGUSR1), 0 when none.
int stop_signal();
// "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
std::string stop_signal_name(int sig);

}  // namespace shardft
