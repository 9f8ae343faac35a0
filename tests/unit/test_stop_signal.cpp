// The stop-signal flag across the BLAS-core restart (train/stop_signal.hpp). Each case runs in a child
// process (EXPECT_EXIT): the flag is process-wide and a set one would stop every later training test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

#include "train/stop_signal.hpp"

namespace shardft {
namespace {

bool is_pending(int sig) {
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  return sigismember(&pending, sig) == 1;
}

// A signal caught before the restart lives only in the old image's flag, which exec drops; held for the
// exec, it must be pending again (a pending signal survives exec) and reach the handler once unblocked.
void caught_signal_is_pending_across_the_hold() {
  install_stop_signal_handlers();
  ::raise(SIGUSR1);
  if (stop_signal() != SIGUSR1) ::_exit(10);
  hold_stop_signals_for_exec();
  if (!is_pending(SIGUSR1)) ::_exit(11);
  install_stop_signal_handlers();  // the new image's call: unblocks, the handler runs
  if (is_pending(SIGUSR1) || stop_signal() != SIGUSR1) ::_exit(12);
  ::_exit(0);
}

// Without a signal, the hold leaves nothing pending (a restart must not invent a stop).
void hold_without_a_signal_leaves_nothing_pending() {
  install_stop_signal_handlers();
  hold_stop_signals_for_exec();
  if (is_pending(SIGUSR1) || is_pending(SIGTERM) || is_pending(SIGINT)) ::_exit(20);
  install_stop_signal_handlers();
  if (stop_signal() != 0) ::_exit(21);
  ::_exit(0);
}

// A signal that arrives while held stays pending and counts once the handlers are back.
void signal_while_held_counts_after_install() {
  install_stop_signal_handlers();
  hold_stop_signals_for_exec();
  ::kill(::getpid(), SIGTERM);
  if (stop_signal() != 0 || !is_pending(SIGTERM)) ::_exit(30);
  install_stop_signal_handlers();
  if (stop_signal() != SIGTERM) ::_exit(31);
  ::_exit(0);
}

TEST(StopSignal, CaughtBeforeTheRestartIsPendingAcrossTheHold) {
  EXPECT_EXIT(caught_signal_is_pending_across_the_hold(), ::testing::ExitedWithCode(0), "");
}

TEST(StopSignal, HoldWithoutASignalLeavesNothingPending) {
  EXPECT_EXIT(hold_without_a_signal_leaves_nothing_pending(), ::testing::ExitedWithCode(0), "");
}

TEST(StopSignal, SignalWhileHeldCountsOnceTheHandlersAreBack) {
  EXPECT_EXIT(signal_while_held_counts_after_install(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace shardft
