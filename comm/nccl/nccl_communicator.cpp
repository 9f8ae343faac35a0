#include "comm/nccl/nccl_communicator.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cublas_gemm.hpp"
#include "kernels/device_traffic.hpp"

namespace shardft {

namespace {

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}
void check(cudaError_t r, const char* what) {
  if (r != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::i8: return ncclInt8;
    case DType::u8: return ncclUint8;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclMax; }

bool is_device_memory(const void* p) {
  if (p == nullptr) return true;  // nothing to stage
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error of an unknown pointer
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// Polls `event` (and the communicator's asynchronous error) until it has completed; past the site's
// limit aborts the NCCL communicator, which frees the GPU of the kernel waiting for the missing peer,
// and reports the timeout.
void wait_for_event(cudaEvent_t event, ncclComm_t comm, const WaitSite& site) {
  wait_until(
      [&] {
        const cudaError_t r = cudaEventQuery(event);
        if (r == cudaSuccess) return true;
        if (r != cudaErrorNotReady) check(r, "cudaEventQuery");
        ncclResult_t state = ncclSuccess;
        check(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError");
        if (state != ncclSuccess && state != ncclInProgress) {
          throw std::runtime_error("NCCL " + std::string(site.collective) + " on group '" + site.group +
                                   "': asynchronous error " + ncclGetErrorString(state));
        }
        return false;
      },
      site, [&] { ncclCommAbort(comm); });
}

// The completion event of one collective, recorded on the communicator's stream.
class CudaEventRequest : public Request {
 public:
  CudaEventRequest(NcclCommunicator& owner, ncclComm_t comm, WaitSite site)
      : owner_(owner), comm_(comm), site_(std::move(site)) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(event_, owner.stream()), "cudaEventRecord");
  }
  ~CudaEventRequest() override {
    // Never waited on: still order the compute stream after it and let the buffers go only when done.
    if (!waited_) {
      try {
        wait();
      } catch (...) {
        // an asynchronous NCCL error while unwinding: the job is failing already
      }
    }
    if (event_) cudaEventDestroy(event_);
  }
  void wait() override {
    if (waited_) return;
    // Device side first: compute issued after wait() reads the collective's output.
    check(cudaStreamWaitEvent(cuda::compute_stream(), event_, 0), "cudaStreamWaitEvent (compute after collective)");
    waited_ = true;
    if (owner_.deferred_waits()) {
      owner_.defer(event_, site_);  // the host checks it at synchronize()
      event_ = nullptr;
      return;
    }
    wait_on_host();
  }
  // The host waits for the collective, whatever the setting (host operands are read or written).
  void wait_on_host() {
    if (!waited_) {
      check(cudaStreamWaitEvent(cuda::compute_stream(), event_, 0), "cudaStreamWaitEvent (compute after collective)");
    }
    count_host_sync((std::string("nccl ") + site_.collective + " waited on the host").c_str());
    wait_for_event(event_, comm_, site_);
    waited_ = true;
  }
  bool test() override {
    if (waited_) return true;
    const cudaError_t r = cudaEventQuery(event_);
    if (r == cudaErrorNotReady) return false;
    check(r, "cudaEventQuery");
    check(cudaStreamWaitEvent(cuda::compute_stream(), event_, 0), "cudaStreamWaitEvent (compute after collective)");
    waited_ = true;
    return true;
  }

 private:
  NcclCommunicator& owner_;
  cudaEvent_t event_ = nullptr;
  ncclComm_t comm_;
  WaitSite site_;
  bool waited_ = false;
};

}  // namespace

int cuda_device_count() { return cuda::device_count(); }

NcclCommunicator::NcclCommunicator(const MpiCommunicator& bootstrap, std::string name)
    : name_(std::move(name)), rank_(bootstrap.rank()), size_(bootstrap.size()) {
  set_collective_timeout(bootstrap.collective_timeout());
  ncclUniqueId id;
  if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap.comm());
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaMalloc(&barrier_word_, sizeof(float)), "cudaMalloc (barrier word)");
  check(cudaMemset(barrier_word_, 0, sizeof(float)), "cudaMemset (barrier word)");
  check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (stream_) cudaStreamSynchronize(stream_);
  for (const Pending& p : pending_) cudaEventDestroy(p.event);
  if (comm_) ncclCommDestroy(comm_);
  if (scratch_) cudaFree(scratch_);
  if (barrier_word_) cudaFree(barrier_word_);
  if (compute_ready_) cudaEventDestroy(compute_ready_);
  if (stream_) cudaStreamDestroy(stream_);
}

// The compute stream is cuda::compute_stream(): the stream cuBLAS is bound to (Kokkos' CUDA stream
// once the first GEMM has bound it, the legacy default stream before; the legacy stream waits for
// all blocking streams, so an event recorded on it also covers a blocking Kokkos stream).
void NcclCommunicator::after_compute() {
  check(cudaEventRecord(compute_ready_, cuda::compute_stream()), "cudaEventRecord (compute before collective)");
  check(cudaStreamWaitEvent(stream_, compute_ready_, 0), "cudaStreamWaitEvent (collective after compute)");
}

NcclCommunicator::Operands NcclCommunicator::stage(const void* send, std::size_t send_bytes, void* recv,
                                                   std::size_t recv_bytes) {
  after_compute();
  const bool host_send = !is_device_memory(send), host_recv = !is_device_memory(recv);
  if (!host_send && !host_recv) return {send, recv, false, false};
  // Staged operands are always out of place: the in-place forms' results are the same at recv.
  const std::size_t need = send_bytes + recv_bytes;
  if (need > scratch_bytes_) {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (before growing the staging buffer)");
    if (scratch_) check(cudaFree(scratch_), "cudaFree (staging buffer)");
    check(cudaMalloc(&scratch_, need), "cudaMalloc (staging buffer for host operands)");
    scratch_bytes_ = need;
  }
  char* dsend = static_cast<char*>(scratch_);
  char* drecv = dsend + send_bytes;
  Operands ops{send, recv, false, false};
  if (host_send) {
    check(cudaMemcpyAsync(dsend, send, send_bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync (stage in)");
    count_device_copy("nccl host operand staged in", send_bytes);
    ops.send = dsend;
    ops.staged_send = true;
  }
  if (host_recv) {
    ops.recv = drecv;
    ops.staged_recv = true;
  }
  return ops;
}

RequestPtr NcclCommunicator::finish(const Operands& ops, void* recv, std::size_t recv_bytes, const char* collective) {
  if (ops.staged_recv) {
    check(cudaMemcpyAsync(recv, ops.recv, recv_bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync (stage out)");
    count_device_copy("nccl host operand staged out", recv_bytes);
  }
  retire_completed();
  auto r = std::make_unique<CudaEventRequest>(*this, comm_, wait_site(collective));
  if (ops.staged_send || ops.staged_recv) {
    // Host memory is read or written: complete before returning, as MPI's blocking copies.
    r->wait_on_host();
    return completed_request();
  }
  return r;
}

RequestPtr NcclCommunicator::iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) {
  if (t == DType::i8 || t == DType::u8) throw std::invalid_argument("reductions over 8-bit integers are not supported");
  ledger_.record(Collective::all_reduce, bus_bytes(Collective::all_reduce, double(count) * dtype_size(t), size_));
  const std::size_t bytes = count * dtype_size(t);
  const Operands o = stage(send, bytes, recv, bytes);
  check(ncclAllReduce(o.send, o.recv, count, nccl_type(t), nccl_op(op), comm_, stream_), "ncclAllReduce");
  return finish(o, recv, bytes, "all_reduce");
}

RequestPtr NcclCommunicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) {
  const std::size_t bytes = recv_count * dtype_size(t);
  ledger_.record(Collective::reduce_scatter, bus_bytes(Collective::reduce_scatter, double(bytes) * size_, size_));
  const Operands o = stage(send, bytes * size_, recv, bytes);
  if (o.send != o.recv) {
    check(ncclReduceScatter(o.send, o.recv, recv_count, nccl_type(t), nccl_op(op), comm_, stream_), "ncclReduceScatter");
    return finish(o, recv, bytes, "reduce_scatter");
  }
  // Our in-place form leaves the block at the start of the buffer; NCCL's leaves it at block `rank`.
  char* mine = static_cast<char*>(recv) + rank_ * bytes;
  check(ncclReduceScatter(send, mine, recv_count, nccl_type(t), nccl_op(op), comm_, stream_), "ncclReduceScatter");
  if (rank_ != 0) check(cudaMemcpyAsync(recv, mine, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  return finish(o, recv, bytes, "reduce_scatter");
}

RequestPtr NcclCommunicator::iall_gather(const void* send, void* recv, std::size_t send_count, DType t) {
  const std::size_t bytes = send_count * dtype_size(t);
  ledger_.record(Collective::all_gather, bus_bytes(Collective::all_gather, double(bytes) * size_, size_));
  const Operands o = stage(send, bytes, recv, bytes * size_);
  check(ncclAllGather(o.send, o.recv, send_count, nccl_type(t), comm_, stream_), "ncclAllGather");
  return finish(o, recv, bytes * size_, "all_gather");
}

RequestPtr NcclCommunicator::ibroadcast(void* buf, std::size_t count, DType t, int root) {
  const std::size_t bytes = count * dtype_size(t);
  ledger_.record(Collective::broadcast, bus_bytes(Collective::broadcast, double(bytes), size_));
  const Operands o = stage(buf, bytes, buf, bytes);
  check(ncclBroadcast(o.send, o.recv, count, nccl_type(t), root, comm_, stream_), "ncclBroadcast");
  return finish(o, buf, bytes, "broadcast");
}

RequestPtr NcclCommunicator::iall_to_all(const void* send, void* recv, std::size_t count, DType t) {
  ledger_.record(Collective::all_to_all, bus_bytes(Collective::all_to_all, double(count) * size_ * dtype_size(t), size_));
  const std::size_t bytes = count * dtype_size(t);
  const Operands o = stage(send, bytes * size_, recv, bytes * size_);
  check(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < size_; ++peer) {
    check(ncclSend(static_cast<const char*>(o.send) + peer * bytes, count, nccl_type(t), peer, comm_, stream_), "ncclSend");
    check(ncclRecv(static_cast<char*>(o.recv) + peer * bytes, count, nccl_type(t), peer, comm_, stream_), "ncclRecv");
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  return finish(o, recv, bytes * size_, "all_to_all");
}

// Every rank has reached the barrier once a one-element all-reduce over the group has completed (a
// stream synchronize alone would not wait for the other ranks). Not counted in the ledger: it moves
// no payload.
void NcclCommunicator::barrier() {
  after_compute();
  check(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
  CudaEventRequest(*this, comm_, wait_site("barrier")).wait_on_host();
}

void NcclCommunicator::defer(cudaEvent_t event, WaitSite site) { pending_.push_back({event, std::move(site)}); }

void NcclCommunicator::retire_completed() {
  std::size_t done = 0;
  while (done < pending_.size() && cudaEventQuery(pending_[done].event) == cudaSuccess) {
    cudaEventDestroy(pending_[done].event);
    ++done;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
}

// One host wait for everything deferred, oldest first, each with its own deadline and report.
void NcclCommunicator::synchronize() {
  if (pending_.empty()) return;
  count_host_sync((std::string("nccl collectives on '") + name_ + "' completed").c_str());
  while (!pending_.empty()) {
    wait_for_event(pending_.front().event, comm_, pending_.front().site);
    cudaEventDestroy(pending_.front().event);
    pending_.erase(pending_.begin());
  }
}

}  // namespace shardft
