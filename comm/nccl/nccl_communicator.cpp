#include "comm/nccl/nccl_communicator.hpp"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cublas_gemm.hpp"

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

// The completion event of one collective, recorded on the communicator's stream.
class CudaEventRequest : public Request {
 public:
  explicit CudaEventRequest(cudaStream_t s) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(event_, s), "cudaEventRecord");
  }
  ~CudaEventRequest() override {
    // Never waited on: still order the compute stream after it and let the buffers go only when done.
    if (!waited_) {
      cudaStreamWaitEvent(cuda::compute_stream(), event_, 0);
      cudaEventSynchronize(event_);
    }
    cudaEventDestroy(event_);
  }
  void wait() override {
    if (waited_) return;
    // Device side first: compute issued after wait() reads the collective's output.
    check(cudaStreamWaitEvent(cuda::compute_stream(), event_, 0), "cudaStreamWaitEvent (compute after collective)");
    check(cudaEventSynchronize(event_), "cudaEventSynchronize");
    waited_ = true;
  }
  bool test() override {
    if (waited_) return true;
    const cudaError_t r = cudaEventQuery(event_);
    if (r == cudaErrorNotReady) return false;
    check(r, "cudaEventQuery");
    wait();  // complete: orders the compute stream and returns at once
    return true;
  }

 private:
  cudaEvent_t event_ = nullptr;
  bool waited_ = false;
};

}  // namespace

int cuda_device_count() { return cuda::device_count(); }

NcclCommunicator::NcclCommunicator(const MpiCommunicator& bootstrap, std::string name)
    : name_(std::move(name)), rank_(bootstrap.rank()), size_(bootstrap.size()) {
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
  if (comm_) ncclCommDestroy(comm_);
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

RequestPtr NcclCommunicator::record() { return std::make_unique<CudaEventRequest>(stream_); }

RequestPtr NcclCommunicator::iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) {
  if (t == DType::i8 || t == DType::u8) throw std::invalid_argument("reductions over 8-bit integers are not supported");
  ledger_.record(Collective::all_reduce, bus_bytes(Collective::all_reduce, double(count) * dtype_size(t), size_));
  after_compute();
  check(ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), comm_, stream_), "ncclAllReduce");
  return record();
}

RequestPtr NcclCommunicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) {
  const double total = double(recv_count) * size_ * dtype_size(t);
  ledger_.record(Collective::reduce_scatter, bus_bytes(Collective::reduce_scatter, total, size_));
  after_compute();
  if (send != recv) {
    check(ncclReduceScatter(send, recv, recv_count, nccl_type(t), nccl_op(op), comm_, stream_), "ncclReduceScatter");
    return record();
  }
  // Our in-place form leaves the block at the start of the buffer; NCCL's leaves it at block `rank`.
  const std::size_t bytes = recv_count * dtype_size(t);
  char* mine = static_cast<char*>(recv) + rank_ * bytes;
  check(ncclReduceScatter(send, mine, recv_count, nccl_type(t), nccl_op(op), comm_, stream_), "ncclReduceScatter");
  if (rank_ != 0) check(cudaMemcpyAsync(recv, mine, bytes, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
  return record();
}

RequestPtr NcclCommunicator::iall_gather(const void* send, void* recv, std::size_t send_count, DType t) {
  ledger_.record(Collective::all_gather,
                 bus_bytes(Collective::all_gather, double(send_count) * size_ * dtype_size(t), size_));
  after_compute();
  check(ncclAllGather(send, recv, send_count, nccl_type(t), comm_, stream_), "ncclAllGather");
  return record();
}

RequestPtr NcclCommunicator::ibroadcast(void* buf, std::size_t count, DType t, int root) {
  ledger_.record(Collective::broadcast, bus_bytes(Collective::broadcast, double(count) * dtype_size(t), size_));
  after_compute();
  check(ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, stream_), "ncclBroadcast");
  return record();
}

RequestPtr NcclCommunicator::iall_to_all(const void* send, void* recv, std::size_t count, DType t) {
  ledger_.record(Collective::all_to_all, bus_bytes(Collective::all_to_all, double(count) * size_ * dtype_size(t), size_));
  const std::size_t bytes = count * dtype_size(t);
  after_compute();
  check(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < size_; ++peer) {
    check(ncclSend(static_cast<const char*>(send) + peer * bytes, count, nccl_type(t), peer, comm_, stream_), "ncclSend");
    check(ncclRecv(static_cast<char*>(recv) + peer * bytes, count, nccl_type(t), peer, comm_, stream_), "ncclRecv");
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  return record();
}

// Every rank has reached the barrier once a one-element all-reduce over the group has completed (a
// stream synchronize alone would not wait for the other ranks). Not counted in the ledger: it moves
// no payload.
void NcclCommunicator::barrier() {
  after_compute();
  check(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

}  // namespace shardft
