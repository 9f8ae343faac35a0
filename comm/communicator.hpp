#pragma once
// One interface for every collective shardft runs, whatever carries it (MPI on CPU, NCCL on GPU).
// Buffers are raw device-accessible pointers plus an element count and type: the comm layer knows
// buffers, never models. Every call records what this rank sends in the group's ledger.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/collective_timeout.hpp"
#include "comm/ledger.hpp"

namespace shardft {

enum class DType { f32, f64, bf16, i8, u8, i32, i64 };
enum class ReduceOp { sum, max };

std::size_t dtype_size(DType t);
const char* dtype_name(DType t);

// A nonblocking collective in flight; wait() returns when its buffers may be used again.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // Moves the collective on without blocking and says whether it is complete (then wait() returns at
  // once). MPI advances nonblocking collectives only inside MPI calls, so a caller overlapping one
  // with compute tests it now and then. The default cannot tell: it answers false, and wait() finishes.
  virtual bool test() { return false; }
};
using RequestPtr = std::unique_ptr<Request>;

// A request that is already complete (a collective with nothing to move, or done synchronously).
RequestPtr completed_request();

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;  // "world", "node", "shard", "replica", ...
  virtual const char* backend() const = 0;     // "mpi" | "nccl"

  // recv[i] = op over ranks of send[i]; send == recv is in place.
  virtual RequestPtr iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) = 0;
  // send holds size()*recv_count elements; rank r receives block r reduced over ranks.
  virtual RequestPtr ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) = 0;
  // recv holds size()*send_count elements: block r is rank r's send. send may alias recv's own block.
  virtual RequestPtr iall_gather(const void* send, void* recv, std::size_t send_count, DType t) = 0;
  virtual RequestPtr ibroadcast(void* buf, std::size_t count, DType t, int root) = 0;
  // Block r of send goes to rank r; block r of recv came from rank r. count is per block.
  virtual RequestPtr iall_to_all(const void* send, void* recv, std::size_t count, DType t) = 0;
  virtual void barrier() = 0;

  // Blocking forms.
  void all_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) {
    iall_reduce(send, recv, count, t, op)->wait();
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) {
    ireduce_scatter(send, recv, recv_count, t, op)->wait();
  }
  void all_gather(const void* send, void* recv, std::size_t send_count, DType t) {
    iall_gather(send, recv, send_count, t)->wait();
  }
  void broadcast(void* buf, std::size_t count, DType t, int root) { ibroadcast(buf, count, t, root)->wait(); }
  void all_to_all(const void* send, void* recv, std::size_t count, DType t) {
    iall_to_all(send, recv, count, t)->wait();
  }

  // Bytes this rank has sent through this communicator, by collective.
  virtual ByteLedger& ledger() = 0;

  // The longest any wait for one of this group's collectives may take before the job is aborted
  // (comm/collective_timeout.hpp); <= 0: no limit. Default 1800 s, as the recipe's collective_timeout_s.
  void set_collective_timeout(double seconds) { timeout_s_ = seconds; }
  double collective_timeout() const { return timeout_s_; }
  // Deferred waits, for a device-resident step: while on, a request's wait() only orders the device
  // work issued after it behind the collective, and the host learns of completion at synchronize(),
  // which waits (with the collective timeout) for every collective since. Buffers may then be reused
  // by device work after wait(), but read on the host only after synchronize(). MPI's waits are host
  // waits whatever the setting: both are no-ops there.
  virtual void set_deferred_waits(bool) {}
  virtual void synchronize() {}

  // What a wait for `collective` on this group reports when it times out.
  WaitSite wait_site(const char* collective) const {
    return WaitSite{name(), backend(), collective, rank(), size(), timeout_s_};
  }

 private:
  double timeout_s_ = 1800;
};

}  // namespace shardft
