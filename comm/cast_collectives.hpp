#pragma once
// Collectives over fp32 buffers that travel as bf16: half the bytes, rounding to bf16 on the way
// (lossless for values that already are bf16, like bf16 compute weights). Reductions add in fp32
// inside the MPI/NCCL bf16 sum and round once per hop.
#include <cstddef>

#include "comm/communicator.hpp"

namespace shardft {

// full receives group.size() * count floats (rank r's shard at r * count).
RequestPtr iall_gather_as_bf16(Communicator& group, const float* shard, std::size_t count, float* full);
// out (+)= this rank's shard of the sum; full holds group.size() * shard_count floats. The nonblocking
// form reads full before it returns (full may be reused at once) and writes out in wait().
RequestPtr ireduce_scatter_as_bf16(Communicator& group, const float* full, std::size_t shard_count, float* out,
                                   bool accumulate);
void reduce_scatter_as_bf16(Communicator& group, const float* full, std::size_t shard_count, float* out, bool accumulate);
// In place.
void all_reduce_as_bf16(Communicator& group, float* buf, std::size_t count);

}  // namespace shardft
