#include "comm/nccl/nccl_communicator.hpp"

#include <stdexcept>
#include <string>

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

class CudaEventRequest : public Request {
 public:
  explicit CudaEventRequest(cudaStream_t s) {
    check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(event_, s), "cudaEventRecord");
  }
  ~CudaEventRequest() override {
    cudaEventSynchronize(event_);
    cudaEventDestroy(event_);
  }
  void wait() override { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

NcclCommunicator::NcclCommunicator(const MpiCommunicator& bootstrap, std::string name)
    : name_(std::move(name)), rank_(bootstrap.rank()), size_(bootstrap.size()) {
  ncclUniqueId id;
  if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, bootstrap.comm());
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
  if (stream_) cudaStreamDestroy(stream_);
}

RequestPtr NcclCommunicator::record() { return std::make_unique<CudaEventRequest>(stream_); }

RequestPtr NcclCommunicator::iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) {
  if (t == DType::i8 || t == DType::u8) throw std::invalid_argument("reductions over 8-bit integers are not supported");
  ledger_.record(Collective::all_reduce, bus_bytes(Collective::all_reduce, double(count) * dtype_size(t), size_));
  check(ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op), comm_, stream_), "ncclAllReduce");
  return record();
}

RequestPtr NcclCommunicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) {
  const double total = double(recv_count) * size_ * dtype_size(t);
  ledger_.record(Collective::reduce_scatter, bus_bytes(Collective::reduce_scatter, total, size_));
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
  check(ncclAllGather(send, recv, send_count, nccl_type(t), comm_, stream_), "ncclAllGather");
  return record();
}

RequestPtr NcclCommunicator::ibroadcast(void* buf, std::size_t count, DType t, int root) {
  ledger_.record(Collective::broadcast, bus_bytes(Collective::broadcast, double(count) * dtype_size(t), size_));
  check(ncclBroadcast(buf, buf, count, nccl_type(t), root, comm_, stream_), "ncclBroadcast");
  return record();
}

RequestPtr NcclCommunicator::iall_to_all(const void* send, void* recv, std::size_t count, DType t) {
  ledger_.record(Collective::all_to_all, bus_bytes(Collective::all_to_all, double(count) * size_ * dtype_size(t), size_));
  const std::size_t bytes = count * dtype_size(t);
  check(ncclGroupStart(), "ncclGroupStart");
  for (int peer = 0; peer < size_; ++peer) {
    check(ncclSend(static_cast<const char*>(send) + peer * bytes, count, nccl_type(t), peer, comm_, stream_), "ncclSend");
    check(ncclRecv(static_cast<char*>(recv) + peer * bytes, count, nccl_type(t), peer, comm_, stream_), "ncclRecv");
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
  return record();
}

void NcclCommunicator::barrier() { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

}  // namespace shardft
