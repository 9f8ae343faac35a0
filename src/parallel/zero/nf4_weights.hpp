#pragma once
// The frozen store's NF4 part (frozen_store.hpp): QLoRA's frozen base matrices held as NF4 4-bit blocks
// (kernels/nf4_quantize.hpp: bitsandbytes' format, block 64, double-quantized absmax), one Nf4Tensor per
// parameter (ParamSpec::nf4): whole on every rank
// at ZeRO stages 0-2; at stage 3 (a shard group given) each rank keeps 1/N of every matrix's packed
// indices and 1/N of its 8-bit absmax (each padded to a multiple of N bytes; the fp32 second-level
// scales and the offset, 4 bytes per 16384 values, stay whole), and those bytes (uint8 on the wire) are
// all-gathered per block: started by prefetch(block) when the engine prefetches the block (nonblocking,
// so they travel while the block before it computes), waited for at its acquire (gathered there only
// when nothing prefetched them), kept until the block's last release. A weight is
// dequantized into the compute dtype the first time the model reads it after its block's acquire, into a
// pooled buffer given back at the block's last release: only the layers being computed exist in full
// precision. A block's matrices share one such buffer, in layout order, so a layer's q, k and v lie
// back to back (the model's stacked projection, model/linear.hpp Linear::stack), and so do gate and up. The values the model reads are
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
#include "parallel/zero/weight_buffer.hpp"

namespace shardft {

// Bytes one rank holds for a matrix of n values split over `shards` ranks (1: nf4_storage_bytes(n)).
std::int64_t nf4_held_bytes(std::int64_t n, int shards);
// Bytes of the buffer a matrix of n values split over `shards` ranks is all-gathered into (its whole
// packed indices and 8-bit absmax, in pooled fp32 storage).
std::int64_t nf4_gathered_bytes(std::int64_t n, int shards);
// The most transient bytes Nf4Weights holds during a training step (the memory preflight's share of
// them): the acquired block's matrices dequantized in `dtype` and, sharded over `shards` ranks (0: whole,
// stages 0-2), that block's gathered bytes and its neighbour's, prefetched (forward: the next block;
// backward: the one before). The model acquires one block at a time.
std::int64_t nf4_peak_transient_bytes(const ParamLayout& layout, ComputeDtype dtype, int shards);

// Where a sharded block's NF4 bytes were gathered (each block counted once per gather).
struct Nf4GatherCounts {
  std::int64_t at_acquire = 0;  // blocking, inside acquire: nothing had prefetched them
  std::int64_t prefetched = 0;  // started by prefetch, ahead of the block's acquire
};

// dst = what a model computing in dtype reads of these NF4 bytes, as fp32: the dequantized values,
// rounded to bf16 (nearest even) or fp16 in those dtypes. The one definition QLoRA's forward, gathers
// of the whole model and adapter merges (infer/qlora_base) share.
void nf4_dequantize_as_read(Unmanaged1<const std::uint8_t> packed, Unmanaged1<const std::uint8_t> absmax_q,
                            Unmanaged1<const float> absmax2, float offset, ComputeDtype dtype, Unmanaged1<float> dst);

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

  // Starts the nonblocking gathers of a block's bytes (stage 3; nothing when they are held or the block
  // is acquired). Collective: every rank of the shard group prefetches the same blocks in the same order.
  void prefetch(int block);
  void acquire(int block);
  void release(int block);
  void progress();  // moves one gather in flight on (a test drives every request in flight)
  Unmanaged1<const float> weight(int param);      // fp32 storage (fp32 / fp16 compute; bf16: widened)
  Unmanaged1<const bf16> weight_bf16(int param);  // bf16 compute only; empty otherwise
  // The values the model reads, as fp32, into dst [numel] (for gathering the whole model; collective
  // when sharded).
  void read(int param, Unmanaged1<float> dst);

  std::int64_t storage_bytes() const;  // the 4-bit blocks and their scales, all parameters
  // Gathered bytes and dequantized matrices: held now, and the most held at once so far.
  std::int64_t transient_bytes() const { return live_; }
  std::int64_t peak_transient_bytes() const { return peak_; }
  const Nf4GatherCounts& gather_counts() const { return counts_; }

 private:
  struct Bytes {  // a matrix's whole packed indices and 8-bit absmax
    Unmanaged1<std::uint8_t> packed, absmax_q;
    View1<float> store;  // sharded: the pooled buffer they were gathered into (bytes in fp32 storage)
  };
  Bytes gather(int i, bool nonblocking);  // collective over group_; nonblocking: requests in in_flight_[i]
  void finish_gather(int i);              // waits for in_flight_[i]
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
  bool block_gathered(int block) const;  // its matrices' bytes held or in flight (sharded)
  View1<float> take(std::int64_t n, const char* label);  // pooled, counted in live_
  void give(View1<float>& v);
  WeightStorage storage() const;        // the compute weights' storage: bf16 for bf16 compute, else fp32
  // The block buffer holding params_ entry i, i dequantized into it on first use (the buffer taken on
  // its block's first use).
  const WeightBuffer& dense(int i);
  void give_dense(int block);
  std::vector<std::vector<RequestPtr>> in_flight_;  // per params_ entry: its gathers not yet waited for
  std::vector<WeightBuffer> block_dense_;  // per block: its matrices dequantized in storage(), while acquired
  std::vector<std::int64_t> block_numel_;  // per block: its NF4 matrices' values
  std::vector<int> block_of_;            // per params_ entry: its block
  std::vector<std::int64_t> dense_at_;   // per params_ entry: its first element in its block's buffer
  std::vector<char> dequantized_;        // per params_ entry: written into its block's buffer
  std::vector<View1<float>> widened_;    // per params_ entry: bf16 storage read as fp32 (weight()), the same
  std::vector<int> refcount_;            // per block
  std::int64_t live_ = 0, peak_ = 0;     // bytes taken from the pool and not given back
  Nf4GatherCounts counts_;
};

}  // namespace shardft
