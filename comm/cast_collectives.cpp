#include "comm/cast_collectives.hpp"

#include <string>

#include "kernels/bf16.hpp"
#include "kernels/types.hpp"

namespace shardft {

namespace {

using Half = View1<bf16>;

Half to_bf16(const float* src, std::size_t n, const char* name) {
  Half out(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
  Unmanaged1<const float> in(src, n);
  Kokkos::parallel_for("to_bf16", Range(0, n), KOKKOS_LAMBDA(const std::int64_t i) { out(i) = bf16(in(i)); });
  return out;
}

void from_bf16(const Half& src, float* dst, std::size_t n, bool accumulate) {
  Unmanaged1<float> out(dst, n);
  Kokkos::parallel_for(
      "from_bf16", Range(0, n), KOKKOS_LAMBDA(const std::int64_t i) {
        const float v = static_cast<float>(src(i));
        out(i) = accumulate ? out(i) + v : v;
      });
}

class Bf16Gather : public Request {
 public:
  Bf16Gather(RequestPtr inner, Half send, Half recv, float* full) : inner_(std::move(inner)), send_(send), recv_(recv), full_(full) {}
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    inner_.reset();
    from_bf16(recv_, full_, recv_.extent(0), false);
  }
  bool test() override { return !inner_ || inner_->test(); }  // widening waits for wait()
  ~Bf16Gather() override {
    if (inner_) inner_->wait();
  }

 private:
  RequestPtr inner_;
  Half send_, recv_;
  float* full_;
};

// Waits for the bf16 reduce-scatter, then widens (or adds) this rank's block into the fp32 output.
class Bf16ReduceScatter : public Request {
 public:
  Bf16ReduceScatter(RequestPtr inner, Half send, Half recv, float* out, bool accumulate)
      : inner_(std::move(inner)), send_(send), recv_(recv), out_(out), accumulate_(accumulate) {}
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    inner_.reset();
    from_bf16(recv_, out_, recv_.extent(0), accumulate_);
  }
  bool test() override { return !inner_ || inner_->test(); }
  ~Bf16ReduceScatter() override {
    if (inner_) inner_->wait();
  }

 private:
  RequestPtr inner_;
  Half send_, recv_;
  float* out_;
  bool accumulate_;
};

}  // namespace

RequestPtr iall_gather_as_bf16(Communicator& group, const float* shard, std::size_t count, float* full) {
  Half send = to_bf16(shard, count, "bf16_gather_send");
  Half recv(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("bf16_gather_recv")), count * group.size());
  RequestPtr inner = group.iall_gather(send.data(), recv.data(), count, DType::bf16);
  return std::make_unique<Bf16Gather>(std::move(inner), send, recv, full);
}

RequestPtr ireduce_scatter_as_bf16(Communicator& group, const float* full, std::size_t shard_count, float* out,
                                   bool accumulate) {
  Half send = to_bf16(full, shard_count * group.size(), "bf16_rs_send");
  Half recv(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string("bf16_rs_recv")), shard_count);
  RequestPtr inner = group.ireduce_scatter(send.data(), recv.data(), shard_count, DType::bf16, ReduceOp::sum);
  return std::make_unique<Bf16ReduceScatter>(std::move(inner), send, recv, out, accumulate);
}

void reduce_scatter_as_bf16(Communicator& group, const float* full, std::size_t shard_count, float* out, bool accumulate) {
  ireduce_scatter_as_bf16(group, full, shard_count, out, accumulate)->wait();
}

void all_reduce_as_bf16(Communicator& group, float* buf, std::size_t count) {
  Half half = to_bf16(buf, count, "bf16_ar");
  group.all_reduce(half.data(), half.data(), count, DType::bf16, ReduceOp::sum);
  from_bf16(half, buf, count, false);
}

}  // namespace shardft
