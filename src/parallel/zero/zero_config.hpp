#pragma once
// The sharding engine's settings (ZeroConfig, config/engine_sections.hpp: what every part of the engine
// in parallel/zero/ is configured from) and its memory report: what it adds up to.
#include <cstdint>

#include "config/engine_sections.hpp"
#include "model/linear.hpp"

namespace shardft {

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
