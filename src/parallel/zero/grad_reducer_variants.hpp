#pragma once
// The variants make_grad_reducer picks from, each defined in a file of its own (grad_reducer.hpp).
#include <memory>

#include "parallel/zero/grad_reducer.hpp"

namespace shardft {

std::unique_ptr<GradReducer> make_all_reduce_reducer(const FlatPartition& part, Communicator& group, bool bf16);
std::unique_ptr<GradReducer> make_accumulate_then_scatter_reducer(const FlatPartition& part, Communicator& group,
                                                                  const GradBucketOptions& opt, BufferPool& pool);
std::unique_ptr<GradReducer> make_bucketed_scatter_reducer(const FlatPartition& part, Communicator& group,
                                                           const GradBucketOptions& opt, BufferPool& pool);
std::unique_ptr<GradReducer> make_int4_scatter_reducer(const FlatPartition& part, const ParallelPlan& plan,
                                                       int quantization_block, BufferPool& pool);

// The gradient slice of `param` inside a buffer laid out as the partition's full units.
Unmanaged1<float> full_unit_slice(const FlatPartition& part, View1<float> full, int param);

}  // namespace shardft
