#include "comm/quantized_collectives.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "comm/comm_buffers.hpp"
#include "kernels/quantize.hpp"

namespace shardft {

namespace {

std::size_t align4(std::size_t n) { return (n + 3) / 4 * 4; }  // scales follow the values 4-byte aligned

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

// Quantizes into dst's payload; counts non-finite inputs on the device when `nonfinite` is given,
// else on the host, throwing before anything is sent.
void pack_int8(const float* src, std::size_t count, int block, std::uint8_t* dst, Unmanaged1<double> nonfinite,
               const char* what) {
  const Payload p = int8_layout(count, block);
  const Unmanaged1<const float> x(src, count);
  const Unmanaged1<std::int8_t> q(reinterpret_cast<std::int8_t*>(dst), count);
  const Unmanaged1<float> scales(reinterpret_cast<float*>(dst + p.value_bytes), p.scale_count);
  if (nonfinite.data()) {
    quantize_int8(x, block, q, scales, nonfinite);
  } else {
    check_finite(quantize_int8(x, block, q, scales), what);
  }
}

void pack_int4(const float* src, std::size_t count, int block, std::uint8_t* dst, Unmanaged1<double> nonfinite,
               const char* what) {
  const Payload p = int4_layout(count, block);
  const Unmanaged1<const float> x(src, count);
  const Unmanaged1<std::uint8_t> packed(dst, int4_bytes(static_cast<std::int64_t>(count)));
  const Unmanaged1<float> scales(reinterpret_cast<float*>(dst + p.value_bytes), p.scale_count);
  if (nonfinite.data()) {
    quantize_int4(x, block, packed, scales, nonfinite);
  } else {
    check_finite(quantize_int4(x, block, packed, scales), what);
  }
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
  QuantizedGather(RequestPtr inner, CommBuffer send, CommBuffer recv, std::size_t count, int block, int ranks,
                  float* full)
      : inner_(std::move(inner)), send_(std::move(send)), recv_(std::move(recv)), count_(count), block_(block),
        ranks_(ranks), full_(full) {}
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
    send_.release();  // later users of these buffers queue after the dequantization
    recv_.release();
  }
  bool test() override { return !inner_ || inner_->test(); }  // dequantization waits for wait()
  ~QuantizedGather() override {
    if (inner_) inner_->wait();
  }

 private:
  RequestPtr inner_;
  CommBuffer send_, recv_;
  std::size_t count_;
  int block_, ranks_;
  float* full_;
};

}  // namespace

std::size_t int8_payload_bytes(std::size_t count, int block) { return int8_layout(count, block).total; }
std::size_t int4_payload_bytes(std::size_t count, int block) { return int4_layout(count, block).total; }

RequestPtr iquantized_all_gather_int8(Communicator& group, const float* shard, std::size_t count, float* full,
                                      int block, Unmanaged1<double> nonfinite) {
  const Payload p = int8_layout(count, block);
  CommBuffer send(p.total, "qwz_send"), recv(p.total * group.size(), "qwz_recv");
  pack_int8(shard, count, block, send.data(), nonfinite, "qwZ weight all-gather");
  RequestPtr inner = group.iall_gather(send.data(), recv.data(), p.total, DType::u8);
  return std::make_unique<QuantizedGather>(std::move(inner), std::move(send), std::move(recv), count, block,
                                           group.size(), full);
}

void quantized_reduce_scatter_int4(Communicator& node, Communicator& cross, const float* full,
                                   std::size_t shard_count, float* out, int block, Unmanaged1<double> nonfinite) {
  const char* what = "qgZ gradient reduce-scatter";
  const std::size_t m = static_cast<std::size_t>(node.size()), k = static_cast<std::size_t>(cross.size());
  const std::size_t S = shard_count;
  // Stage 1, within the node: local peer j gets, for every node, the shard of that node's rank j.
  const Payload chunk = int4_layout(k * S, block);
  const CommBuffer send1(chunk.total * m, "qgz_send1"), recv1(chunk.total * m, "qgz_recv1");
  const CommBuffer gathered(sizeof(float) * k * S, "qgz_chunk");
  for (std::size_t j = 0; j < m; ++j) {
    for (std::size_t n = 0; n < k; ++n) {  // the K shards for local index j, contiguous
      Kokkos::deep_copy(ExecSpace(), Unmanaged1<float>(gathered.as<float>() + n * S, S),
                        Unmanaged1<const float>(full + (n * m + j) * S, S));
    }
    pack_int4(gathered.as<float>(), k * S, block, send1.data() + j * chunk.total, nonfinite, what);
  }
  node.all_to_all(send1.data(), recv1.data(), chunk.total, DType::u8);
  // The sum over this node's ranks.
  const CommBuffer partial_buf(sizeof(float) * k * S, "qgz_partial");
  const Unmanaged1<float> partial = partial_buf.view<float>(k * S);
  Kokkos::deep_copy(ExecSpace(), partial, 0.f);
  for (std::size_t i = 0; i < m; ++i) unpack_int4_add(recv1.data() + i * chunk.total, k * S, block, partial.data());

  // Stage 2, across nodes: node n gets this node's partial sum of the shard its rank (same local index) owns.
  const Payload piece = int4_layout(S, block);
  const CommBuffer send2(piece.total * k, "qgz_send2"), recv2(piece.total * k, "qgz_recv2");
  for (std::size_t n = 0; n < k; ++n) {
    pack_int4(partial.data() + n * S, S, block, send2.data() + n * piece.total, nonfinite, what);
  }
  cross.all_to_all(send2.data(), recv2.data(), piece.total, DType::u8);
  Kokkos::deep_copy(ExecSpace(), Unmanaged1<float>(out, S), 0.f);
  for (std::size_t n = 0; n < k; ++n) unpack_int4_add(recv2.data() + n * piece.total, S, block, out);
}

}  // namespace shardft
