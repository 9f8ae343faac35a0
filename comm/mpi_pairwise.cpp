#include "comm/mpi_pairwise.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_wait.hpp"
#include "kernels/bf16.hpp"

namespace shardft {

MPI_Datatype mpi_datatype(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16: return MPI_UINT16_T;
    case DType::i8: return MPI_INT8_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
  }
  return MPI_BYTE;
}

int mpi_count(std::size_t count) {
  if (count > static_cast<std::size_t>(INT32_MAX)) {
    throw std::length_error("collective of " + std::to_string(count) + " elements exceeds MPI's int count; bucket it");
  }
  return static_cast<int>(count);
}

namespace {

// The MPI backend's buffers are host memory, so these are plain loops (the compiler vectorizes them).
template <class T>
void combine(ReduceOp op, const T* a, const T* b, T* out, std::size_t n) {
  if (op == ReduceOp::sum) {
    for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = b[i] > a[i] ? b[i] : a[i];
  }
}

void combine_bf16(ReduceOp op, const std::uint16_t* a, const std::uint16_t* b, std::uint16_t* out, std::size_t n) {
  if (op == ReduceOp::sum) {
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16::round_bits(bf16::to_float(a[i]) + bf16::to_float(b[i]));
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16::to_float(b[i]) > bf16::to_float(a[i]) ? b[i] : a[i];
  }
}

// Every rank sends block `rank` (from `own`) to every other rank and receives theirs, block b landing
// at out + first[b]. Direct messages: each rank sends and receives (N-1)/N of the result once.
class PairwiseGather : public Request {
 public:
  PairwiseGather(MPI_Comm comm, int tag, DType t, const char* own, char* out, const std::vector<std::size_t>& first,
                 const std::vector<std::size_t>& len, const WaitSite& site)
      : site_(site) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (std::size_t n : len) mpi_count(n);  // throws before anything is posted
    const std::size_t esize = dtype_size(t);
    char* own_out = out + first[rank] * esize;
    if (own != own_out) std::memcpy(own_out, own, len[rank] * esize);
    reqs_.reserve(2 * static_cast<std::size_t>(size - 1));
    for (int k = 1; k < size; ++k) {
      const int from = (rank - k + size) % size, to = (rank + k) % size;
      reqs_.emplace_back(MPI_REQUEST_NULL);
      MPI_Irecv(out + first[from] * esize, static_cast<int>(len[from]), mpi_datatype(t), from, tag, comm, &reqs_.back());
      reqs_.emplace_back(MPI_REQUEST_NULL);
      MPI_Isend(own_out, static_cast<int>(len[rank]), mpi_datatype(t), to, tag, comm, &reqs_.back());
    }
  }
  ~PairwiseGather() override { wait(); }  // never leave a collective dangling
  void wait() override { mpi_wait_all(static_cast<int>(reqs_.size()), reqs_.data(), site_); }
  bool test() override {
    int all = 0;
    MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &all, MPI_STATUSES_IGNORE);
    return all != 0;
  }

 private:
  WaitSite site_;
  std::vector<MPI_Request> reqs_;
};

// One rank's part of a reduction over N blocks of the input (block b: elements [first[b], first[b] +
// len[b])). The reduce phase (steps 1..N-1, as in the header) leaves block `rank` reduced at out_own;
// for an all-reduce a gather phase then sends it to every other rank and receives theirs into
// gather_into, where each block lands at its own offset.
class PairwiseReduction : public Request {
 public:
  PairwiseReduction(MPI_Comm comm, int tag, DType t, ReduceOp op, const char* in, char* out_own,
                    std::vector<std::size_t> first, std::vector<std::size_t> len, char* gather_into,
                    const WaitSite& site)
      : comm_(comm), tag_(tag), type_(t), op_(op), esize_(dtype_size(t)), in_(in), out_(out_own),
        gather_into_(gather_into), first_(std::move(first)), len_(std::move(len)), site_(site) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    steps_ = size_ - 1;
    for (std::size_t n : len_) mpi_count(n);
    const char* own = block_in(rank_);
    // Step 1 lands in the result itself unless the input is there (in place); the steps after it
    // alternate between two scratch blocks.
    step1_in_out_ = own != out_;
    const int landings = step1_in_out_ ? steps_ - 1 : steps_;
    const int scratch_blocks = landings < 2 ? landings : 2;
    if (scratch_blocks > 0) scratch_.reset(new char[static_cast<std::size_t>(scratch_blocks) * own_bytes()]);
    if (steps_ == 0 && own != out_) std::memcpy(out_, own, own_bytes());  // one rank: its block is the result
    for (int k = 1; k <= steps_ && k <= 2; ++k) post_recv(k);
    sends_.resize(static_cast<std::size_t>(steps_), MPI_REQUEST_NULL);
    for (int k = 1; k <= steps_; ++k) {
      const int to = (rank_ + k) % size_;
      MPI_Isend(block_in(to), static_cast<int>(len_[to]), mpi_datatype(type_), to, tag_, comm_, &sends_[k - 1]);
    }
  }
  ~PairwiseReduction() override {
    if (!done_) advance(true);  // never leave a collective dangling
  }
  void wait() override { advance(true); }
  bool test() override { return advance(false); }

 private:
  std::size_t own_bytes() const { return len_[rank_] * esize_; }
  const char* block_in(int b) const { return in_ + first_[b] * esize_; }
  char* landing(int step) {
    if (step == 1 && step1_in_out_) return out_;
    const int slot = step1_in_out_ ? step % 2 : (step - 1) % 2;
    return scratch_.get() + static_cast<std::size_t>(slot) * own_bytes();
  }
  void post_recv(int step) {
    const int from = (rank_ - step + size_) % size_;
    MPI_Irecv(landing(step), static_cast<int>(len_[rank_]), mpi_datatype(type_), from, tag_, comm_, &recvs_[step % 2]);
  }
  void fold(int step) {
    const char* acc = step == 1 ? block_in(rank_) : out_;
    reduce_elements(type_, op_, acc, landing(step), out_, len_[rank_]);
  }
  bool complete(std::vector<MPI_Request>& rs, bool block) const {
    if (block) {
      mpi_wait_all(static_cast<int>(rs.size()), rs.data(), site_);
      return true;
    }
    int all = 0;
    MPI_Testall(static_cast<int>(rs.size()), rs.data(), &all, MPI_STATUSES_IGNORE);
    return all != 0;
  }
  // Folds every step whose message is in (waiting for each when `block`), completes the sends, then
  // runs the gather phase if there is one.
  bool advance(bool block) {
    if (done_) return true;
    while (next_ <= steps_) {
      MPI_Request& r = recvs_[next_ % 2];
      int arrived = 0;
      if (block) {
        mpi_wait(r, site_);
        arrived = 1;
      } else {
        MPI_Test(&r, &arrived, MPI_STATUS_IGNORE);
      }
      if (!arrived) return false;
      fold(next_);
      if (next_ + 2 <= steps_) post_recv(next_ + 2);  // into the scratch block just folded
      ++next_;
    }
    if (!complete(sends_, block)) return false;
    // An in-place all-reduce's gather writes over blocks the reduce phase sent: it starts only now.
    if (gather_into_ != nullptr && steps_ > 0) {
      if (!gather_) gather_ = std::make_unique<PairwiseGather>(comm_, tag_, type_, out_, gather_into_, first_, len_, site_);
      if (block) {
        gather_->wait();
      } else if (!gather_->test()) {
        return false;
      }
    }
    done_ = true;
    return true;
  }

  MPI_Comm comm_;
  int tag_;
  DType type_;
  ReduceOp op_;
  std::size_t esize_;
  const char* in_;
  char* out_;
  char* gather_into_;
  std::vector<std::size_t> first_, len_;
  WaitSite site_;
  int rank_ = 0, size_ = 1, steps_ = 0, next_ = 1;
  bool step1_in_out_ = true, done_ = false;
  std::unique_ptr<char[]> scratch_;
  MPI_Request recvs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // step k's receive is recvs_[k % 2]
  std::vector<MPI_Request> sends_;
  std::unique_ptr<PairwiseGather> gather_;
};

}  // namespace

void reduce_elements(DType t, ReduceOp op, const void* a, const void* b, void* out, std::size_t n) {
  switch (t) {
    case DType::f32: return combine(op, static_cast<const float*>(a), static_cast<const float*>(b), static_cast<float*>(out), n);
    case DType::f64: return combine(op, static_cast<const double*>(a), static_cast<const double*>(b), static_cast<double*>(out), n);
    case DType::i32:
      return combine(op, static_cast<const std::int32_t*>(a), static_cast<const std::int32_t*>(b), static_cast<std::int32_t*>(out), n);
    case DType::i64:
      return combine(op, static_cast<const std::int64_t*>(a), static_cast<const std::int64_t*>(b), static_cast<std::int64_t*>(out), n);
    case DType::bf16:
      return combine_bf16(op, static_cast<const std::uint16_t*>(a), static_cast<const std::uint16_t*>(b),
                          static_cast<std::uint16_t*>(out), n);
    case DType::i8:
    case DType::u8: break;
  }
  throw std::invalid_argument("reductions over 8-bit integers are not supported");
}

RequestPtr start_pairwise_reduce_scatter(MPI_Comm comm, int tag, const void* send, void* recv, std::size_t count,
                                         DType t, ReduceOp op, const WaitSite& site) {
  if (t == DType::i8 || t == DType::u8) throw std::invalid_argument("reductions over 8-bit integers are not supported");
  if (count == 0) return completed_request();
  int n = 1;
  MPI_Comm_size(comm, &n);
  std::vector<std::size_t> first(static_cast<std::size_t>(n)), len(static_cast<std::size_t>(n), count);
  for (int b = 0; b < n; ++b) first[b] = static_cast<std::size_t>(b) * count;
  return std::make_unique<PairwiseReduction>(comm, tag, t, op, static_cast<const char*>(send), static_cast<char*>(recv),
                                             std::move(first), std::move(len), nullptr, site);
}

RequestPtr start_pairwise_all_reduce(MPI_Comm comm, int tag, const void* send, void* recv, std::size_t count, DType t,
                                     ReduceOp op, const WaitSite& site) {
  if (t == DType::i8 || t == DType::u8) throw std::invalid_argument("reductions over 8-bit integers are not supported");
  if (count == 0) return completed_request();
  int n = 1, rank = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &rank);
  // Blocks of ceil(count / N); the last ones shorter, or empty when count < N.
  const std::size_t block = (count + n - 1) / n;
  std::vector<std::size_t> first(static_cast<std::size_t>(n)), len(static_cast<std::size_t>(n));
  for (int b = 0; b < n; ++b) {
    first[b] = std::min(static_cast<std::size_t>(b) * block, count);
    len[b] = std::min(block, count - first[b]);
  }
  char* out = static_cast<char*>(recv);
  char* own = out + first[rank] * dtype_size(t);
  return std::make_unique<PairwiseReduction>(comm, tag, t, op, static_cast<const char*>(send), own, std::move(first),
                                             std::move(len), out, site);
}

RequestPtr start_pairwise_all_gather(MPI_Comm comm, int tag, const void* send, void* recv, std::size_t count, DType t,
                                     const WaitSite& site) {
  if (count == 0) return completed_request();
  int n = 1;
  MPI_Comm_size(comm, &n);
  std::vector<std::size_t> first(static_cast<std::size_t>(n)), len(static_cast<std::size_t>(n), count);
  for (int b = 0; b < n; ++b) first[b] = static_cast<std::size_t>(b) * count;
  return std::make_unique<PairwiseGather>(comm, tag, t, static_cast<const char*>(send), static_cast<char*>(recv), first, len, site);
}

}  // namespace shardft
