#pragma once
// One training run per output_dir. Rank 0 holds an exclusive flock(2) on output_dir/.shardft.lock for
// the whole run; the file names the holder ("HOST PID START-TIME"). A second run on the directory fails
// at start on every rank (ConfigError, exit 2) naming the holder. The kernel drops a flock when its
// process dies, so a lock left by a killed run is simply taken over, and the log says whose it was.
// A run that ends (normally, preempted or by an exception) empties the file as it lets go.
#include <ostream>
#include <string>

#include "comm/communicator.hpp"

namespace shardft {

inline constexpr const char* kOutputLockName = ".shardft.lock";

class OutputLock {
 public:
  // Collective over `world` (host buffers: an MPI communicator). Rank 0 creates output_dir (checked as
  // the key `output_dir`, train/output_path.hpp) and takes the lock; rank 0's failure is thrown on every
  // rank as the same ConfigError, so no rank goes on alone. Rank 0 logs a takeover.
  static OutputLock acquire(const std::string& output_dir, Communicator& world, std::ostream& log);

  OutputLock() = default;
  OutputLock(OutputLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  OutputLock& operator=(OutputLock&& other) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock() { release(); }

  bool held() const { return fd_ >= 0; }
  void release();  // empties the file and closes it (the flock goes with the descriptor)

 private:
  friend OutputLock lock_output_dir(const std::string& output_dir, std::string* note);
  explicit OutputLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// Rank 0's part, one process, no MPI: takes the lock on DIR/.shardft.lock or throws ConfigError
// naming DIR and the holder. `note` gets the takeover message ("" when the file was empty or new).
OutputLock lock_output_dir(const std::string& output_dir, std::string* note);

}  // namespace shardft
