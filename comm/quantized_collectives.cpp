#include "comm/quantized_collectives.hpp"

#include <stdexcept>
#include <string>

#include "kernels/quantize.hpp"

namespace shardft {

namespace {

std::size_t align4(std::size_t n) { return (n + 3) / 4 * 4; }  // scales follow the values 4-byte aligned

using Bytes = View1<std::uint8_t>;

Bytes bytes(const char* name, std::size_t n) {
  return Bytes(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(name)), n);
}

void check_finite(std::int64_t bad, const char* what) {
  if (bad > 0) {
    throw std::runtime_error(std::string(what) + ": " + std::to_string(bad) +
                             " non-finite values (NaN or Inf) in the data to send; refusing to quantize them");
  }
}

// Quantized payload layout: [values (int8 or packed int4), padded to 4 bytes | fp32 scales].
struct Payload {
  std::size_t value_bytes, scale_count, total;
};
Payload int8_layout(std::size_t count, int block) {
  const std::size_t nb = quant_blocks(static_cast<std::int64_t>(count), block);
  return {align4(count), nb, align4(count) + 4 * nb};
}
Payload int4_layout(std::size_t count, int block) {
  const std::size_t nb = quant_blocks(static_cast<std::int64_t>(count), block);
  const std::size_t vb = align4(int4_bytes(static_cast<std::int64_t>(count)));
  return {vb, nb, vb + 4 * nb};
}

void pack_int4(const float* src, std::size_t count, int block, std::uint8_t* dst, const char* what) {
  const Payload p = int4_layout(count, block);
  check_finite(quantize_int4(Unmanaged1<const float>(src, count), block,
                             Unmanaged1<std::uint8_t>(dst, int4_bytes(static_cast<std::int64_t>(count))),
                             Unmanaged1<float>(reinterpret_cast<float*>(dst + p.value_bytes), p.scale_count)),
               what);
}

void unpack_int4_add(const std::uint8_t* src, std::size_t count, int block, float* dst) {
  const Payload p = int4_layout(count, block);
  dequantize_int4(Unmanaged1<const std::uint8_t>(src, int4_bytes(static_cast<std::int64_t>(count))),
                  Unmanaged1<const float>(reinterpret_cast<const float*>(src + p.value_bytes), p.scale_count), block,
                  Unmanaged1<float>(dst, count), true);
}

// Waits for the byte all-gather, then turns every rank's int8 payload into floats.
class QuantizedGather : public Request {
 public:
  QuantizedGather(RequestPtr inner, Bytes send, Bytes recv, std::size_t count, int block, int ranks, float* full)
      : inner_(std::move(inner)), send_(send), recv_(recv), count_(count), block_(block), ranks_(ranks), full_(full) {}
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    inner_.reset();
    const Payload p = int8_layout(count_, block_);
    for (int r = 0; r < ranks_; ++r) {
      const std::uint8_t* base = recv_.data() + static_cast<std::size_t>(r) * p.total;
      dequantize_int8(Unmanaged1<const std::int8_t>(reinterpret_cast<const std::int8_t*>(base), count_),
                      Unmanaged1<const float>(reinterpret_cast<const float*>(base + p.value_bytes), p.scale_count),
                      block_, Unmanaged1<float>(full_ + static_cast<std::size_t>(r) * count_, count_));
    }
  }
  bool test() override { return !inner_ || inner_->test(); }  // dequantization waits for wait()
  ~QuantizedGather() override {
    if (inner_) inner_->wait();
  }

 private:
  RequestPtr inner_;
  Bytes send_, recv_;
  std::size_t count_;
  int block_, ranks_;
  float* full_;
};

}  // namespace

std::size_t int8_payload_bytes(std::size_t count, int block) { return int8_layout(count, block).total; }
std::size_t int4_payload_bytes(std::size_t count, int block) { return int4_layout(count, block).total; }

RequestPtr iquantized_all_gather_int8(Communicator& group, const float* shard, std::size_t count, float* full,
                                      int block) {
  const Payload p = int8_layout(count, block);
  Bytes send = bytes("qwz_send", p.total), recv = bytes("qwz_recv", p.total * group.size());
  check_finite(quantize_int8(Unmanaged1<const float>(shard, count), block,
                             Unmanaged1<std::int8_t>(reinterpret_cast<std::int8_t*>(send.data()), count),
                             Unmanaged1<float>(reinterpret_cast<float*>(send.data() + p.value_bytes), p.scale_count)),
               "qwZ weight all-gather");
  RequestPtr inner = group.iall_gather(send.data(), recv.data(), p.total, DType::u8);
  return std::make_unique<QuantizedGather>(std::move(inner), send, recv, count, block, group.size(), full);
}

void quantized_reduce_scatter_int4(Communicator& node, Communicator& cross, const float* full,
                                   std::size_t shard_count, float* out, int block) {
  const std::size_t m = static_cast<std::size_t>(node.size()), k = static_cast<std::size_t>(cross.size());
  const std::size_t S = shard_count;
  // Stage 1, within the node: local peer j gets, for every node, the shard of that node's rank j.
  const Payload chunk = int4_layout(k * S, block);
  Bytes send1 = bytes("qgz_send1", chunk.total * m), recv1 = bytes("qgz_recv1", chunk.total * m);
  View1<float> gathered(std::string("qgz_chunk"), k * S);
  for (std::size_t j = 0; j < m; ++j) {
    for (std::size_t n = 0; n < k; ++n) {  // the K shards for local index j, contiguous
      Kokkos::deep_copy(Unmanaged1<float>(gathered.data() + n * S, S),
                        Unmanaged1<const float>(full + (n * m + j) * S, S));
    }
    pack_int4(gathered.data(), k * S, block, send1.data() + j * chunk.total, "qgZ gradient reduce-scatter");
  }
  node.all_to_all(send1.data(), recv1.data(), chunk.total, DType::u8);
  View1<float> partial(std::string("qgz_partial"), k * S);  // zero: the sum over this node's ranks
  for (std::size_t i = 0; i < m; ++i) unpack_int4_add(recv1.data() + i * chunk.total, k * S, block, partial.data());

  // Stage 2, across nodes: node n gets this node's partial sum of the shard its rank (same local index) owns.
  const Payload piece = int4_layout(S, block);
  Bytes send2 = bytes("qgz_send2", piece.total * k), recv2 = bytes("qgz_recv2", piece.total * k);
  for (std::size_t n = 0; n < k; ++n) {
    pack_int4(partial.data() + n * S, S, block, send2.data() + n * piece.total, "qgZ gradient reduce-scatter");
  }
  cross.all_to_all(send2.data(), recv2.data(), piece.total, DType::u8);
  Kokkos::deep_copy(Unmanaged1<float>(out, S), 0.f);
  for (std::size_t n = 0; n < k; ++n) unpack_int4_add(recv2.data() + n * piece.total, S, block, out);
}

}  // namespace shardft
