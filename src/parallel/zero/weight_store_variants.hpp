#pragma once
// The variants make_weight_store picks from, each defined in a file of its own (weight_store.hpp).
#include <memory>

#include "parallel/zero/weight_store.hpp"

namespace shardft {

// Stages 0-2; `master`, where not empty, is the compute weights themselves (fp32 stage 0).
std::unique_ptr<WeightStore> make_replicated_weights(const FlatPartition& part, const OwnedRegion& owned,
                                                     const ZeroConfig& cfg, Communicator& group, BufferPool& pool,
                                                     View1<float> master);
// Stage 3.
std::unique_ptr<WeightStore> make_sharded_weights(const FlatPartition& part, const OwnedRegion& owned,
                                                  const ZeroConfig& cfg, const ParallelPlan& plan, BufferPool& pool);

}  // namespace shardft
