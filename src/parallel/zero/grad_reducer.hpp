#pragma once
// Where the model's gradient goes and how the ranks sum it: one variant per way, picked once by
// make_grad_reducer from the stage and the ZeRO++ flags; the engine never asks which it has.
//   stage 0 (all_reduce_reducer.cpp): the whole gradient, replicated, all-reduced once after the
//     step's last micro-batch;
//   stage 1 (accumulate_then_scatter.cpp): the whole gradient accumulated locally over the
//     micro-batches, reduce-scattered in buckets during the last one's backward;
//   stages 2-3 (scatter_as_produced.cpp): each unit's gradient in a buffer of its own while its block's
//     backward runs, then reduce-scattered in buckets overlapped with backward, or with qgZ as int4
//     blocks over the node and cross-node groups (blocking, unit by unit);
//   hybrid sharding (grad_reducer.cpp): any of them wrapped by the sum over the model's copies.
// The reduced gradient of the region this rank owns, owned(), is what the optimizer shard reads.
#include <cstdint>
#include <memory>

#include "comm/communicator.hpp"
#include "kernels/types.hpp"
#include "parallel/buffer_pool.hpp"
#include "parallel/flat_partition.hpp"
#include "parallel/grad_buckets.hpp"
#include "parallel/parallel_plan.hpp"
#include "parallel/zero/grad_sum_state.hpp"
#include "parallel/zero/step_protocol.hpp"
#include "parallel/zero/zero_config.hpp"

namespace shardft {

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // A new sum over the step (its buffers stale until reached: grad_sum_state.hpp); nothing from the last
  // step is left in flight.
  virtual void begin_step() = 0;
  // The buffer the model adds (`use` add: zeroed first where the sum has not reached it) or writes (`use`
  // write: `overwrite` where its values are stale) parameter `param`'s gradient into (a parameter of the
  // partition).
  virtual GradWrite grad(int param, GradUse use) = 0;
  // Every gradient of `unit` (a unit with parameters) for micro-batch `mb` has been added.
  virtual void unit_done(int unit, const MicroBatch& mb) = 0;
  // The end of micro-batch mb; after the last, owned() holds the step's reduced gradient.
  virtual void end_micro_batch(const MicroBatch& mb) = 0;
  // Keeps nonblocking reductions moving (MPI advances them only inside its calls).
  virtual void progress() {}
  virtual void set_overlap(bool /*on*/) {}
  // ZeRO++'s quantization counts the non-finite values it meets into counter(0) (see ZeroEngine).
  virtual void set_nonfinite_counter(Unmanaged1<double> /*counter*/) {}
  virtual const GradBuckets* buckets() const { return nullptr; }
  // The reduced gradient of the owned region.
  virtual View1<float> owned() const = 0;
  // fp32 elements held for the whole run (the full gradient at stages 0-1, the owned shard otherwise).
  virtual std::int64_t persistent_elements() const = 0;
  // The most gradient elements held at once apart from those (unit buffers, bucket staging).
  virtual std::int64_t peak_transient_elements() const { return 0; }
};

// The reducer of the partition's gradient for `cfg` over the plan's shard group (and its replica and
// qgZ groups where the plan has them). Transient buffers come from `pool`.
std::unique_ptr<GradReducer> make_grad_reducer(const FlatPartition& part, const ZeroConfig& cfg,
                                               const ParallelPlan& plan, BufferPool& pool);

// A sum over `group` in place, carried as bf16 where `bf16` (communication_data_type bf16).
void all_reduce_gradient(Communicator& group, View1<float> buf, bool bf16);

}  // namespace shardft
