#include "comm/mpi_communicator.hpp"

#include <stdexcept>

#include "comm/mpi_pairwise.hpp"
#include "comm/mpi_wait.hpp"

namespace shardft {

namespace {

// bf16 has no MPI type: reduce it as uint16 bit patterns through user ops that add (or max) in fp32,
// as the pairwise exchanges do (inout = inout op in).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_elements(DType::bf16, ReduceOp::sum, inout, in, inout, static_cast<std::size_t>(*len));
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_elements(DType::bf16, ReduceOp::max, inout, in, inout, static_cast<std::size_t>(*len));
}

MPI_Op mpi_op(DType t, ReduceOp op) {
  if (t == DType::bf16) {
    static MPI_Op sum = MPI_OP_NULL, max = MPI_OP_NULL;
    if (sum == MPI_OP_NULL) {
      MPI_Op_create(&bf16_sum, 1, &sum);
      MPI_Op_create(&bf16_max, 1, &max);
    }
    return op == ReduceOp::sum ? sum : max;
  }
  if (t == DType::i8 || t == DType::u8) throw std::invalid_argument("reductions over 8-bit integers are not supported");
  return op == ReduceOp::sum ? MPI_SUM : MPI_MAX;
}

// From this many bytes (the whole buffer of the collective) up, all-gather and all-reduce run as
// pairwise point-to-point exchanges (comm/mpi_pairwise.hpp), which move the data in the fewest bytes
// per rank; below it MPI's latency-bound algorithms (recursive doubling, Bruck) win.
constexpr std::size_t kPairwiseBytes = 64 * 1024;

class MpiRequest : public Request {
 public:
  explicit MpiRequest(WaitSite site) : site_(std::move(site)) {}
  MPI_Request req = MPI_REQUEST_NULL;
  void wait() override { mpi_wait(req, site_); }
  bool test() override {
    int done = 1;
    if (req != MPI_REQUEST_NULL) MPI_Test(&req, &done, MPI_STATUS_IGNORE);  // a completed request becomes NULL
    return done != 0;
  }
  ~MpiRequest() override { mpi_wait(req, site_); }  // never leave a collective dangling

 private:
  WaitSite site_;
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name) : comm_(comm), name_(std::move(name)) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (p2p_comm_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_comm_);
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

RequestPtr MpiCommunicator::iall_reduce(const void* send, void* recv, std::size_t count, DType t, ReduceOp op) {
  ledger_.record(Collective::all_reduce, bus_bytes(Collective::all_reduce, double(count) * dtype_size(t), size_));
  if (size_ > 1 && count * dtype_size(t) >= kPairwiseBytes) {
    return start_pairwise_all_reduce(p2p_comm("all_reduce"), next_p2p_tag(), send, recv, count, t, op, wait_site("all_reduce"));
  }
  auto r = std::make_unique<MpiRequest>(wait_site("all_reduce"));
  MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, mpi_count(count), mpi_datatype(t), mpi_op(t, op), comm_, &r->req);
  return r;
}

RequestPtr MpiCommunicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DType t, ReduceOp op) {
  const double total = double(recv_count) * size_ * dtype_size(t);
  ledger_.record(Collective::reduce_scatter, bus_bytes(Collective::reduce_scatter, total, size_));
  // Pairwise at every size, so that each element is summed in the same order however the engine
  // buckets its gradients (bucketed and unbucketed steps agree bit for bit). In place (tests only; the
  // engine never asks for it) MPI takes the whole input from recv and leaves this rank's block at its
  // start, where the pairwise exchange would overwrite a block still to send.
  if (send != recv) {
    return start_pairwise_reduce_scatter(p2p_comm("reduce_scatter"), next_p2p_tag(), send, recv, recv_count, t, op,
                                         wait_site("reduce_scatter"));
  }
  auto r = std::make_unique<MpiRequest>(wait_site("reduce_scatter"));
  MPI_Ireduce_scatter_block(send == recv ? MPI_IN_PLACE : send, recv, mpi_count(recv_count), mpi_datatype(t),
                            mpi_op(t, op), comm_, &r->req);
  return r;
}

MPI_Comm MpiCommunicator::p2p_comm(const char* collective) {
  // Created on first use, which every rank of the group reaches (it is inside a collective); the dup
  // is itself collective, so it waits under the same deadline.
  if (p2p_comm_ == MPI_COMM_NULL) {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Comm_idup(comm_, &p2p_comm_, &r);
    mpi_wait(r, wait_site(collective));
  }
  return p2p_comm_;
}

int MpiCommunicator::next_p2p_tag() {
  // Every rank starts the group's collectives in the same order, so the counters agree; 32767 is the
  // smallest tag bound MPI allows, far more than ever run at once.
  const int tag = p2p_tag_;
  p2p_tag_ = (p2p_tag_ + 1) % 32768;
  return tag;
}

RequestPtr MpiCommunicator::iall_gather(const void* send, void* recv, std::size_t send_count, DType t) {
  const std::size_t sz = dtype_size(t);
  ledger_.record(Collective::all_gather, bus_bytes(Collective::all_gather, double(send_count) * size_ * sz, size_));
  if (send_count * size_ * sz >= kPairwiseBytes) {
    return start_pairwise_all_gather(p2p_comm("all_gather"), next_p2p_tag(), send, recv, send_count, t, wait_site("all_gather"));
  }
  auto r = std::make_unique<MpiRequest>(wait_site("all_gather"));
  const bool in_place = send == static_cast<const char*>(recv) + static_cast<std::size_t>(rank_) * send_count * sz;
  MPI_Iallgather(in_place ? MPI_IN_PLACE : send, mpi_count(send_count), mpi_datatype(t), recv, mpi_count(send_count),
                 mpi_datatype(t), comm_, &r->req);
  return r;
}

RequestPtr MpiCommunicator::ibroadcast(void* buf, std::size_t count, DType t, int root) {
  auto r = std::make_unique<MpiRequest>(wait_site("broadcast"));
  ledger_.record(Collective::broadcast, bus_bytes(Collective::broadcast, double(count) * dtype_size(t), size_));
  MPI_Ibcast(buf, mpi_count(count), mpi_datatype(t), root, comm_, &r->req);
  return r;
}

RequestPtr MpiCommunicator::iall_to_all(const void* send, void* recv, std::size_t count, DType t) {
  auto r = std::make_unique<MpiRequest>(wait_site("all_to_all"));
  ledger_.record(Collective::all_to_all, bus_bytes(Collective::all_to_all, double(count) * size_ * dtype_size(t), size_));
  MPI_Ialltoall(send, mpi_count(count), mpi_datatype(t), recv, mpi_count(count), mpi_datatype(t), comm_, &r->req);
  return r;
}

void MpiCommunicator::barrier() {
  MPI_Request r = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm_, &r);
  mpi_wait(r, wait_site("barrier"));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key, const std::string& name) const {
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(comm_, color, key, &sub);
  auto group = std::make_unique<MpiCommunicator>(sub, name);
  group->set_collective_timeout(collective_timeout());
  return group;
}

}  // namespace shardft
