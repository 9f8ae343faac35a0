#include "comm/collective_timeout.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

namespace shardft {

namespace {

void abort_job(const CollectiveTimeout& t) {
  std::fprintf(stderr, "shardft: error: collective timeout: %s\n", t.message().c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, kCollectiveTimeoutExit);
  std::_Exit(kCollectiveTimeoutExit);
}

std::mutex& handler_mutex() {
  static std::mutex m;
  return m;
}
CollectiveTimeoutHandler& handler() {
  static CollectiveTimeoutHandler h = abort_job;
  return h;
}

int world_rank() {
  int initialized = 0, finalized = 0, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

}  // namespace

std::string CollectiveTimeout::message() const {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << "rank " << world_rank << " waited " << waited_s << " s for " << site.collective << " on group '" << site.group
    << "' (rank " << site.group_rank << " of " << site.group_size << ", " << site.backend
    << "), past collective_timeout_s " << site.limit_s
    << ": another rank of the group has stopped, died or is running other collectives; aborting the job";
  return s.str();
}

CollectiveTimeoutHandler set_collective_timeout_handler(CollectiveTimeoutHandler h) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  CollectiveTimeoutHandler previous = std::move(handler());
  handler() = h ? std::move(h) : CollectiveTimeoutHandler(abort_job);
  return previous;
}

void report_collective_timeout(const WaitSite& site, double waited_s) {
  CollectiveTimeout t;
  t.site = site;
  t.world_rank = world_rank();
  t.waited_s = waited_s;
  CollectiveTimeoutHandler h;
  {
    std::lock_guard<std::mutex> lock(handler_mutex());
    h = handler();
  }
  h(t);
}

void wait_until(const std::function<bool()>& test, const WaitSite& site, const std::function<void()>& before_report) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  double next_report = site.limit_s;
  for (long tries = 0;; ++tries) {
    if (test()) return;
    // The first tries spin (a collective about to complete); then the core goes to ranks that
    // share it (oversubscribed runs) between tries, as Open MPI's mpi_yield_when_idle does.
    if (tries >= 64) std::this_thread::yield();
    if (site.limit_s > 0 && (tries & 63) == 63) {
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > next_report) {
        if (before_report) before_report();
        report_collective_timeout(site, waited);  // the default never returns
        next_report = waited + site.limit_s;
      }
    }
  }
}

}  // namespace shardft
