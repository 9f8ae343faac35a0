#pragma once
// The sharding engine's settings and its memory report: what every part of the engine
// (parallel/zero/) is configured from, and what it adds up to.
#include <cstdint>

#include "model/linear.hpp"

namespace shardft {

struct ZeroConfig {
  int stage = 0;
  ComputeDtype dtype = ComputeDtype::fp32;   // weights travel in it (bf16 gathers are lossless then)
  bool bf16_gradients = false;               // communication_data_type bf16: reduce gradients as bf16
  bool quantized_weights = false;            // qwZ: stage-3 gathers as int8 blocks
  bool quantized_gradients = false;          // qgZ: stage 2/3 reduce-scatter as int4, hierarchical
  int hpz_partition_size = 1;                // hpZ: > 1 keeps a secondary copy for backward gathers in groups this big
  int quantization_block = 64;
  // Communication buckets, in elements (parallel/grad_buckets.hpp). Gradients: each bucket's
  // reduce-scatter starts when it fills during backward (stages 1-3; stage 1 in the last micro-batch);
  // <= 0 is one unit (layer block) per bucket. Not qgZ, whose reduction stays blocking per unit.
  std::int64_t reduce_bucket_elements = 0;
  bool overlap_comm = true;                  // false: each bucket is waited for when it starts (for A/B runs)
  // Stages 1-2: elements of updated-weight gathers in flight at once after the optimizer step (<= 0: one unit).
  std::int64_t allgather_bucket_elements = 0;
  // Stage 3: elements gathered ahead of the block being computed; the next block is always prefetched,
  // further blocks while the weights gathered ahead stay within this.
  std::int64_t prefetch_elements = 0;
  // Stage 0: the optimizer step runs unit by unit on a device queue of its own, overlapped with the next
  // step's forward (parallel/zero/optimizer_shard.hpp). The same arithmetic: the results do not change.
  bool overlap_optimizer = false;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8, weight_decay = 0.0;
};

// Bytes a rank holds, by kind (persistent), and the largest transient gathers / gradient units seen.
struct MemoryReport {
  std::int64_t weights = 0, grads = 0, optimizer = 0;
  std::int64_t frozen_weights = 0;  // the part of `weights` that holds frozen parameters
  std::int64_t nf4_weights = 0;     // the part of `frozen_weights` held as NF4 blocks (QLoRA)
  std::int64_t peak_gathered = 0, peak_unit_grads = 0;
  // The part of peak_gathered that is QLoRA's (Nf4Weights): NF4 bytes gathered at stage 3 for the block
  // computing and the one prefetched, and the block's matrices dequantized in the compute dtype.
  std::int64_t peak_nf4_transient = 0;
  std::int64_t pooled = 0;  // transient buffers held for reuse between blocks and steps (buffer_pool.hpp)
};

}  // namespace shardft
