#pragma once
// Compressed collectives of ZeRO++ (Wang et al., 2023), on top of any Communicator.
//   qwZ  quantized all-gather: each rank sends its fp32 shard as int8 blocks + fp32 scales; every rank
//        dequantizes every shard (its own too, so all ranks hold the same weights).
//   qgZ  quantized hierarchical reduce-scatter: int4 blocks through an intra-node all-to-all, reduced in
//        fp32 after dequantization, then the node's partial sums through an inter-node all-to-all,
//        reduced again: cross-node traffic is 1/8 of fp32 and 1/ranks_per_node of the data.
// Non-finite values: by default each quantization's count is read back on the host (a sync) and any
// NaN or Inf stops the collective before it sends, with std::runtime_error naming it. A training step
// passes a device counter `nonfinite` instead: the counts add into nonfinite(0) on the device, nothing
// waits, the payload goes out quantized as it is (meaningless where a block held a NaN or Inf), and the
// caller raises the error when it reads the counter back (a training step: at its one read-back, before
// the step is logged or saved).
// Temporaries come from comm/comm_buffers: after the first call of each size, none allocates.
#include <cstddef>

#include "comm/communicator.hpp"
#include "kernels/types.hpp"

namespace shardft {

// full holds group.size() * count floats afterwards; rank r's shard lands at full + r * count.
RequestPtr iquantized_all_gather_int8(Communicator& group, const float* shard, std::size_t count, float* full,
                                      int block, Unmanaged1<double> nonfinite = {});

// `full` holds N = node.size() * cross.size() shards of shard_count floats, the shard of world rank
// (cross rank) * node.size() + (node rank) at that index. out receives this rank's shard summed over
// all N ranks.
void quantized_reduce_scatter_int4(Communicator& node, Communicator& cross, const float* full,
                                   std::size_t shard_count, float* out, int block, Unmanaged1<double> nonfinite = {});

// Bytes one rank's payload takes on the wire for `count` values (values + scales).
std::size_t int8_payload_bytes(std::size_t count, int block);
std::size_t int4_payload_bytes(std::size_t count, int block);

}  // namespace shardft
