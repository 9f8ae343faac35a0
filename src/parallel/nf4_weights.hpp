#pragma once
// QLoRA's frozen base matrices held as NF4 4-bit blocks (kernels/nf4_quantize.hpp: bitsandbytes' format,
// block 64, double-quantized absmax), one Nf4Tensor per parameter (ParamSpec::nf4): whole on every rank
// at ZeRO stages 0-2; at stage 3 (a shard group given) each rank keeps 1/N of every matrix's packed
// indices and 1/N of its 8-bit absmax (each padded to a multiple of N bytes; the fp32 second-level
// scales and the offset, 4 bytes per 16384 values, stay whole), and a block's acquire all-gathers those
// bytes (uint8 on the wire) for its matrices, kept until the block's last release. A weight is
// dequantized into the compute dtype the first time the model reads it after its block's acquire, into a
// pooled buffer given back at the block's last release: only the layers being computed exist in full
// precision. The values the model reads are
// dequantize(quantize(W)) rounded to the compute dtype (bf16: nearest even; fp16: fp16 values in fp32).
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "model/linear.hpp"
#include "kernels/nf4_quantize.hpp"
#include "comm/communicator.hpp"
#include "model/param_layout.hpp"
#include "parallel/buffer_pool.hpp"

namespace shardft {

// Bytes one rank holds for a matrix of n values split over `shards` ranks (1: nf4_storage_bytes(n)).
std::int64_t nf4_held_bytes(std::int64_t n, int shards);

class Nf4Weights {
 public:
  // shard_group: nullptr keeps every matrix whole; else each rank keeps its shard of the bytes.
  Nf4Weights(const ParamLayout& layout, ComputeDtype dtype, BufferPool& pool, Communicator* shard_group);

  bool holds(int param) const { return param >= 0 && param < static_cast<int>(index_.size()) && index_[param] >= 0; }
  bool empty() const { return params_.empty(); }
  // A matrix already quantized where it is read from (a bitsandbytes 4-bit checkpoint), or nullopt.
  using StoredNf4 = std::function<std::optional<Nf4Tensor>(int param)>;
  // Quantizes every NF4 parameter: fill(param, out) writes its full-precision values (row-major, device);
  // one that `stored` gives is taken as it is instead (its shape must be the parameter's).
  void load(const std::function<void(int param, Unmanaged1<float> out)>& fill, const StoredNf4& stored = {});

  void acquire(int block);
  void release(int block);
  Unmanaged1<const float> weight(int param);      // fp32 storage (fp32 / fp16 compute; bf16: widened)
  Unmanaged1<const bf16> weight_bf16(int param);  // bf16 compute only; empty otherwise
  // The values the model reads, as fp32, into dst [numel] (for gathering the whole model; collective
  // when sharded).
  void read(int param, Unmanaged1<float> dst);

  std::int64_t storage_bytes() const;  // the 4-bit blocks and their scales, all parameters

 private:
  struct Bytes {  // a matrix's whole packed indices and 8-bit absmax
    Unmanaged1<std::uint8_t> packed, absmax_q;
    View1<float> store;  // sharded: the pooled buffer they were gathered into (bytes in fp32 storage)
  };
  Bytes gather(int i);                 // collective over group_
  const Bytes& whole(int param) const;  // this matrix's whole bytes: its own, or gathered while acquired
  void dequantize(int param, Unmanaged1<float> dst) const;
  void dequantize(int param, Unmanaged1<bf16> dst) const;
  void give_back(int block);
  const ParamLayout& layout_;
  ComputeDtype dtype_;
  BufferPool& pool_;
  Communicator* group_;                  // stage 3's shard group, or nullptr
  std::vector<int> params_;              // NF4 parameters, layout order
  std::vector<int> index_;               // per layout param: its place in params_, or -1
  std::vector<Nf4Tensor> q_;             // per params_ entry (sharded: packed and absmax_q are this rank's shard)
  std::vector<Bytes> own_;               // whole: q_'s arrays; sharded: gathered while acquired
  void drop_gathered(int i);
  std::vector<View1<float>> dense_;      // per params_ entry: dequantized, fp32 storage, while acquired
  std::vector<View1<bf16>> dense_bf16_;  // the same, bf16 compute
  std::vector<int> refcount_;            // per block
};

}  // namespace shardft
