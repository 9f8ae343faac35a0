#pragma once
// No rank left waiting: every wait for a collective has a deadline (the recipe's collective_timeout_s,
// torch's NCCL watchdog by another name). A rank that dies or stops leaves the others inside a
// collective that will never complete; past the deadline the waiting rank reports which collective
// on which group it was waiting for, and the job is aborted on every rank.
#include <functional>
#include <string>

namespace shardft {

// Where a wait happens: the group, its backend and the collective, for the message.
struct WaitSite {
  std::string group;        // "world", "shard", ...
  const char* backend = ""; // "mpi" | "nccl"
  const char* collective = "";
  int group_rank = 0, group_size = 1;
  double limit_s = 1800;    // <= 0: no deadline
};

struct CollectiveTimeout {
  WaitSite site;
  int world_rank = 0;
  double waited_s = 0;
  // "rank 0 (world rank 0) waited 20.0 s for all_reduce on group 'world' (rank 0 of 2, mpi), past
  // collective_timeout_s 20: another rank of the group has stopped, died or diverged"
  std::string message() const;
};

// Exit code of a job aborted by a collective timeout.
constexpr int kCollectiveTimeoutExit = 3;

using CollectiveTimeoutHandler = std::function<void(const CollectiveTimeout&)>;
// The default handler writes the message to stderr and aborts the MPI job (MPI_Abort on the world,
// which ends every rank, stopped ones too); it never returns. A handler that returns lets the wait go
// on for another limit (tests record the report and then let the late rank in). Returns the previous one.
CollectiveTimeoutHandler set_collective_timeout_handler(CollectiveTimeoutHandler handler);
void report_collective_timeout(const WaitSite& site, double waited_s);

// Spins on test() (a nonblocking completion check that also moves the collective on) until it answers
// true, yielding the core between tries; each time site.limit_s passes, runs before_report (the NCCL
// backend aborts its communicator there) and reports the timeout.
void wait_until(const std::function<bool()>& test, const WaitSite& site,
                const std::function<void()>& before_report = {});

}  // namespace shardft
