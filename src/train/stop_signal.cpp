#include "train/stop_signal.hpp"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace shardft {

namespace {

std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (g_stop.compare_exchange_strong(none, sig)) return;  // the first: finish the step, save, stop
  if (sig == SIGINT) {
    static const char msg[] = "shardft: second interrupt: stopping now, without a checkpoint of this step\n";
    const ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(130);
  }
}

const sigset_t& stop_signal_set() {
  static const sigset_t set = [] {
    sigset_t s;
    sigemptyset(&s);
    for (int sig : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&s, sig);
    return s;
  }();
  return set;
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGUSR1}) ::sigaction(sig, &sa, nullptr);
  // Held across a restart (hold_stop_signals_for_exec): one that came meanwhile is delivered now, here.
  ::sigprocmask(SIG_UNBLOCK, &stop_signal_set(), nullptr);
}

void hold_stop_signals_for_exec() {
  ::sigprocmask(SIG_BLOCK, &stop_signal_set(), nullptr);
  // One already caught lives only in this image's flag, which the exec drops: raised again while blocked,
  // it is pending, and a pending signal survives the exec.
  if (const int sig = g_stop.load()) ::raise(sig);
}

int stop_signal() { return g_stop.load(); }

std::string stop_signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace shardft
