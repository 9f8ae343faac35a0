#pragma once
// The NCCL backend of Communicator (GPU builds): one NCCL communicator per group, its unique id
// broadcast over the group's MPI communicator, collectives on the group's own CUDA stream.
//
// Streams. Compute (Kokkos kernels and cuBLAS GEMMs) runs on the process's compute stream,
// shardft::cuda::compute_stream() (kernels/cuda/cublas_gemm.hpp). Each NcclCommunicator creates its
// own non-blocking stream, so a collective can overlap compute. Ordering between the two is by events,
// never by device-wide synchronization:
//  - before a collective reads its send buffer (or overwrites its receive buffer), the communicator
//    records an event on the compute stream and makes its own stream wait for it: every kernel issued
//    before the call has finished writing (and reading) those buffers;
//  - after the collective has written its output, an event is recorded on the communicator's stream.
//    That event is the Request: wait() makes the compute stream wait for it (work issued after wait()
//    sees the result) and blocks the host on it (the buffers may be reused or read from the host, as
//    with the MPI backend); test() asks whether it has completed without blocking. With deferred waits
//    on (a training step), wait() stops after the stream wait: the event joins the pending ones, which
//    synchronize() waits for, so the host never stalls inside the step.
//
// Host buffers. The engine's buffers are device memory, and a step's host values (token counts, the
// stop flag) go over the plan's MPI host_world; what host memory still reaches NCCL (the host vectors
// of checkpoint gathers) is staged through a device scratch buffer: copied in, reduced on NCCL, copied
// back, waited for on the host. Any pointer cudaPointerGetAttributes does not call device (or managed) memory is
// treated so.
//
// No rank left waiting. wait() polls the event (never cudaEventSynchronize) and NCCL's asynchronous
// error state; past collective_timeout_s it aborts the NCCL communicator (ncclCommAbort, so no kernel
// is left spinning on the GPU) and reports the timeout (comm/collective_timeout.hpp), which ends the job.
#include <cuda_runtime.h>
#include <nccl.h>

#include <vector>

#include "comm/mpi_communicator.hpp"

namespace shardft {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `bootstrap`'s ranks; each rank must already have selected its GPU. Takes the
  // bootstrap group's collective timeout.
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
  void set_deferred_waits(bool on) override { deferred_ = on; }
  void synchronize() override;

  // A completed-on-the-device event left for synchronize() (deferred waits), and the wait it stands for.
  void defer(cudaEvent_t event, WaitSite site);
  bool deferred_waits() const { return deferred_; }

  // The communicator's own stream, on which its collectives run.
  cudaStream_t stream() const { return stream_; }

 private:
  // Device pointers for one collective's send and receive buffers: the caller's where they are device
  // memory, the scratch buffers (send copied in) where they are host memory.
  struct Operands {
    const void* send;
    void* recv;
    bool staged_send, staged_recv;
  };
  Operands stage(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes);
  // Runs after issue(): copies a staged result back to `recv` and waits for it; else the event request.
  RequestPtr finish(const Operands& ops, void* recv, std::size_t recv_bytes, const char* collective);
  // Makes stream_ wait for everything issued so far on the compute stream.
  void after_compute();
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;  // recorded on the compute stream before each collective
  float* barrier_word_ = nullptr;        // one device float the barrier all-reduces
  void* scratch_ = nullptr;              // host-buffer staging: [send | recv], grown as needed
  std::size_t scratch_bytes_ = 0;
  bool deferred_ = false;
  struct Pending {
    cudaEvent_t event;
    WaitSite site;
  };
  std::vector<Pending> pending_;  // deferred waits, oldest first
  void retire_completed();        // drops the pending events that have completed, without blocking
  std::string name_;
  int rank_ = 0, size_ = 1;
  ByteLedger ledger_;
};

// Number of CUDA devices this process sees (0 when there is no GPU or no driver).
int cuda_device_count();

}  // namespace shardft
