#pragma once
// The NCCL backend of Communicator (GPU builds): one NCCL communicator per group, its unique id
// broadcast over the group's MPI communicator, collectives on the group's own CUDA stream. A
// Request is a CUDA event recorded after the collective; wait() blocks the host on it, and
// stream_wait() makes another stream wait without blocking the host.
#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/mpi_communicator.hpp"

namespace shardft {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks; each rank must already have selected its GPU.
  NcclCommunicator(const MpiCommunicator& bootstrap, std::string name);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  const char* backend() const override { return "nccl"; }

  RequestPtr iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) override;
  RequestPtr ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) override;
  RequestPtr iall_gather(const void* send, void* recv, std::size_t send_count, DType t) override;
  RequestPtr ibroadcast(void* buf, std::size_t count, DType t, int root) override;
  RequestPtr iall_to_all(const void* send, void* recv, std::size_t count, DType t) override;
  void barrier() override;
  ByteLedger& ledger() override { return ledger_; }

  cudaStream_t stream() const { return stream_; }

 private:
  RequestPtr record();
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::string name_;
  int rank_ = 0, size_ = 1;
  ByteLedger ledger_;
};

// Number of CUDA devices this process sees (0 when there is no GPU or no driver).
int cuda_device_count();

}  // namespace shardft
