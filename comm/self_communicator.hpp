#pragma once
// A group of one rank without MPI: every collective is a copy (or nothing). Lets the engine and the
// trainer run in single-process code and tests exactly as they run in a job.
#include <string>

#include "comm/communicator.hpp"
#include "kernels/buffer_copy.hpp"

namespace shardft {

class SelfCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "self"; }

  RequestPtr iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp) override {
    return copy(send, recv, count * dtype_size(t));
  }
  RequestPtr ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp) override {
    return copy(send, recv, recv_count * dtype_size(t));
  }
  RequestPtr iall_gather(const void* send, void* recv, std::size_t send_count, DType t) override {
    return copy(send, recv, send_count * dtype_size(t));
  }
  RequestPtr ibroadcast(void*, std::size_t, DType, int) override { return done(); }
  RequestPtr iall_to_all(const void* send, void* recv, std::size_t count, DType t) override {
    return copy(send, recv, count * dtype_size(t));
  }
  void barrier() override {}
  ByteLedger& ledger() override { return ledger_; }

 private:
  static RequestPtr done() { return completed_request(); }
  static RequestPtr copy(const void* send, void* recv, std::size_t bytes) {
    copy_buffer_bytes(recv, send, bytes);  // device buffers on a GPU build
    return done();
  }
  std::string name_ = "self";
  ByteLedger ledger_;
};

}  // namespace shardft
