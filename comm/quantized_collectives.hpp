#pragma once
// Compressed collectives of ZeRO++ (Wang et al., 2023), on top of any Communicator.
//   qwZ  quantized all-gather: each rank sends its fp32 shard as int8 blocks + fp32 scales; every rank
//        dequantizes every shard (its own too, so all ranks hold the same weights).
//   qgZ  quantized hierarchical reduce-scatter: int4 blocks through an intra-node all-to-all, reduced in
//        fp32 after dequantization, then the node's partial sums through an inter-node all-to-all,
//        reduced again: cross-node traffic is 1/8 of fp32 and 1/ranks_per_node of the data.
// A non-finite value is never sent: the caller gets std::runtime_error naming the collective.
#include <cstddef>

#include "comm/communicator.hpp"

namespace shardft {

// full holds group.size() * count floats afterwards; rank r's shard lands at full + r * count.
RequestPtr iquantized_all_gather_int8(Communicator& group, const float* shard, std::size_t count, float* full,
                                      int block);

// `full` holds N = node.size() * cross.size() shards of shard_count floats, the shard of world rank
// (cross rank) * node.size() + (node rank) at that index. out receives this rank's shard summed over
// all N ranks.
void quantized_reduce_scatter_int4(Communicator& node, Communicator& cross, const float* full,
                                   std::size_t shard_count, float* out, int block);

// Bytes one rank's payload takes on the wire for `count` values (values + scales).
std::size_t int8_payload_bytes(std::size_t count, int block);
std::size_t int4_payload_bytes(std::size_t count, int block);

}  // namespace shardft
