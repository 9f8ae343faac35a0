#pragma once
// MPI bootstrap: one object per process, alive for the whole job. Topology, process groups and the
// Communicator interface build on it.
#include <string>

namespace shardft {

class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Ends every rank of the job: a failing rank must never leave the others waiting in a collective.
  [[noreturn]] void abort_job(int exit_code, const std::string& message) const;

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace shardft
