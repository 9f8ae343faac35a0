#include "comm/cast_collectives.hpp"

#include <utility>

#include "comm/comm_buffers.hpp"
#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

namespace {

// n bf16 values in a pooled buffer.
CommBuffer half(std::size_t n, const char* name) { return CommBuffer(n * sizeof(bf16), name); }

CommBuffer to_bf16(const float* src, std::size_t n, const char* name) {
  CommBuffer buf = half(n, name);
  const Unmanaged1<bf16> out = buf.view<bf16>(n);
  Unmanaged1<const float> in(src, n);
  Kokkos::parallel_for("to_bf16", Range(0, n), KOKKOS_LAMBDA(const std::int64_t i) { out(i) = bf16(in(i)); });
  return buf;
}

void from_bf16(const CommBuffer& buf, float* dst, std::size_t n, bool accumulate) {
  const Unmanaged1<const bf16> src(buf.as<bf16>(), n);
  Unmanaged1<float> out(dst, n);
  Kokkos::parallel_for(
      "from_bf16", Range(0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        const float v = static_cast<float>(src(i));
        out(i) = accumulate ? out(i) + v : v;
      });
}

class Bf16Gather : public Request {
 public:
  Bf16Gather(RequestPtr inner, CommBuffer send, CommBuffer recv, std::size_t n, float* full)
      : inner_(std::move(inner)), send_(std::move(send)), recv_(std::move(recv)), n_(n), full_(full) {}
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    inner_.reset();
    from_bf16(recv_, full_, n_, false);
    send_.release();  // later users of these buffers queue after the widening
    recv_.release();
  }
  bool test() override { return !inner_ || inner_->test(); }  // widening waits for wait()
  ~Bf16Gather() override {
    if (inner_) inner_->wait();
  }

 private:
  RequestPtr inner_;
  CommBuffer send_, recv_;
  std::size_t n_;
  float* full_;
};

// Waits for the bf16 reduce-scatter, then widens (or adds) this rank's block into the fp32 output.
class Bf16ReduceScatter : public Request {
 public:
  Bf16ReduceScatter(RequestPtr inner, CommBuffer send, CommBuffer recv, std::size_t n, float* out, bool accumulate)
      : inner_(std::move(inner)), send_(std::move(send)), recv_(std::move(recv)), n_(n), out_(out), accumulate_(accumulate) {}
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    inner_.reset();
    from_bf16(recv_, out_, n_, accumulate_);
    send_.release();
    recv_.release();
  }
  bool test() override { return !inner_ || inner_->test(); }
  ~Bf16ReduceScatter() override {
    if (inner_) inner_->wait();
  }

 private:
  RequestPtr inner_;
  CommBuffer send_, recv_;
  std::size_t n_;
  float* out_;
  bool accumulate_;
};

}  // namespace

RequestPtr iall_gather_as_bf16(Communicator& group, const float* shard, std::size_t count, float* full) {
  CommBuffer send = to_bf16(shard, count, "bf16_gather_send");
  CommBuffer recv = half(count * group.size(), "bf16_gather_recv");
  RequestPtr inner = group.iall_gather(send.data(), recv.data(), count, DType::bf16);
  return std::make_unique<Bf16Gather>(std::move(inner), std::move(send), std::move(recv), count * group.size(), full);
}

RequestPtr ireduce_scatter_as_bf16(Communicator& group, const float* full, std::size_t shard_count, float* out,
                                   bool accumulate) {
  CommBuffer send = to_bf16(full, shard_count * group.size(), "bf16_rs_send");
  CommBuffer recv = half(shard_count, "bf16_rs_recv");
  RequestPtr inner = group.ireduce_scatter(send.data(), recv.data(), shard_count, DType::bf16, ReduceOp::sum);
  return std::make_unique<Bf16ReduceScatter>(std::move(inner), std::move(send), std::move(recv), shard_count, out,
                                             accumulate);
}

void reduce_scatter_as_bf16(Communicator& group, const float* full, std::size_t shard_count, float* out, bool accumulate) {
  ireduce_scatter_as_bf16(group, full, shard_count, out, accumulate)->wait();
}

void all_reduce_as_bf16(Communicator& group, float* buf, std::size_t count) {
  const CommBuffer h = to_bf16(buf, count, "bf16_ar");
  group.all_reduce(h.data(), h.data(), count, DType::bf16, ReduceOp::sum);
  from_bf16(h, buf, count, false);
}

}  // namespace shardft
