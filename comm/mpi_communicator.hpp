#pragma once
// The MPI backend of Communicator (CPU builds, and the bootstrap of GPU ones).
#include <mpi.h>

#include <memory>
#include <string>

#include "comm/communicator.hpp"

namespace shardft {

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of comm (freed on destruction) unless it is MPI_COMM_WORLD.
  MpiCommunicator(MPI_Comm comm, std::string name);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "mpi"; }

  RequestPtr iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) override;
  RequestPtr ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) override;
  RequestPtr iall_gather(const void* send, void* recv, std::size_t send_count, DType t) override;
  RequestPtr ibroadcast(void* buf, std::size_t count, DType t, int root) override;
  RequestPtr iall_to_all(const void* send, void* recv, std::size_t count, DType t) override;
  void barrier() override;
  ByteLedger& ledger() override { return ledger_; }

  MPI_Comm comm() const { return comm_; }

  // A sub-group: ranks with the same color, ordered by key (MPI_Comm_split).
  std::unique_ptr<MpiCommunicator> split(int color, int key, const std::string& name) const;

 private:
  // Reduce-scatters, and large all-gathers and all-reduces, run as point-to-point messages
  // (comm/mpi_pairwise.hpp) on a duplicate of comm_, each collective under its own tag.
  MPI_Comm p2p_comm(const char* collective);
  int next_p2p_tag();

  MPI_Comm comm_;
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;
  int p2p_tag_ = 0;
  std::string name_;
  int rank_ = 0, size_ = 1;
  ByteLedger ledger_;
};

}  // namespace shardft
