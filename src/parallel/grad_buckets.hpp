#pragma once
// Gradient reduction in buckets, overlapped with backward (DeepSpeed's reduce_bucket_size and
// overlap_comm). The engine hands over each unit's full gradient as soon as its block's backward is
// done; consecutive units are coalesced into a bucket of about `bucket_elements` elements, and a full
// bucket starts one nonblocking reduce-scatter at once, so the reduction of layer i runs while layer
// i-1 computes. Buckets complete in the order they started (accumulation order, hence every bit of the
// result, does not depend on timing), at the latest in finish(), before anything reads the gradient.
//
// Coalescing: rank r owns shard r of every unit, so a bucket of units a, b, ... is sent rank-major
// ([a's shard 0 | b's shard 0 | ... | a's shard 1 | b's shard 1 | ...]) and one reduce-scatter leaves
// [a's shard r | b's shard r | ...] on rank r. A bucket of one unit is sent from the unit's own buffer.
#include <cstdint>
#include <deque>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/types.hpp"
#include "parallel/buffer_pool.hpp"
#include "parallel/flat_partition.hpp"

namespace shardft {

struct GradBucketOptions {
  // Elements per bucket (DeepSpeed semantics: a bucket is sent before a unit would take it past this
  // size; a unit bigger than it goes alone). <= 0: one unit per bucket.
  std::int64_t bucket_elements = 0;
  bool bf16 = false;     // communication_data_type bf16: the reduce-scatter carries bf16
  bool overlap = true;   // false: wait for each bucket as soon as it starts (the blocking reduction)
};

// Which units' shards of the owned gradient the step has written. The first reduction to reach a
// unit's shard writes it (no zero fill before, no add), later ones (micro-batches after the first) add
// to it; shards that no reduction reached (a unit no gradient flowed to) are zeroed at the step's end.
// Writing instead of adding to zero keeps every value, except that an exact -0 stays -0.
class OwnedShardWrites {
 public:
  explicit OwnedShardWrites(const FlatPartition& part) : part_(part), written_(part.units().size(), 0) {}
  void begin_step();
  // Whether `unit`'s shard was written before in this step; from now on it is.
  bool mark(int unit);
  // Zeroes the shards of `owned` that no reduction wrote in this step, adjacent ones in one fill.
  void zero_unwritten(const View1<float>& owned) const;

 private:
  const FlatPartition& part_;
  std::vector<char> written_;
};

class GradBuckets {
 public:
  // Reduced shards go into `owned` at each unit's shard_offset (written first in a step, then added).
  // Staging buffers come from `pool` and go back to it, with each unit's buffer once its bucket is
  // reduced.
  GradBuckets(const FlatPartition& part, Communicator& group, View1<float> owned, const GradBucketOptions& opt,
              BufferPool& pool);
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // `unit`'s whole (padded) gradient is final. `keep` holds its memory until the bucket is reduced (a
  // temporary per-unit buffer, which add takes over and empties, and which goes back to the pool
  // once reduced); pass an empty view when `grad` points into memory that outlives the step's
  // reduction (stage 1's full gradient).
  void add(int unit, const float* grad, View1<float>&& keep);
  // Starts the open bucket (the end of a backward: nothing more joins it).
  void flush();
  // Tests the buckets in flight (MPI progresses them only inside MPI calls) and completes those at the
  // front of the queue that are done. Cheap; call it often during compute.
  void progress();
  // Starts the open bucket and completes every bucket.
  void finish();
  // A step begins: the reductions write each unit's shard of `owned` first, then add to it.
  void begin_step() { writes_.begin_step(); }
  // finish(), then the shards of units no bucket reached are zeroed: `owned` holds the step's sum.
  void finish_step();
  void set_overlap(bool on) { opt_.overlap = on; }
  bool idle() const { return open_.empty() && inflight_.empty(); }
  // Gradient elements held for buckets not yet reduced (open or in flight), for memory reports.
  std::int64_t held_elements() const;
  // Buckets started, and those found complete by progress() (while compute went on) rather than
  // waited for: how much of the reduction the overlap hid, as benchmarks report it.
  std::int64_t started() const { return started_; }
  std::int64_t completed_during_compute() const { return completed_during_compute_; }

 private:
  struct Piece {
    int unit;
    const float* grad;
    View1<float> keep;
  };
  struct Bucket {
    std::vector<int> units;
    View1<float> send, recv, keep_unit;  // keep_unit: a one-unit bucket sends from the unit's buffer
    RequestPtr request;
    bool direct = false;  // the request puts the reduced shards into owned itself (no recv)
    std::vector<char> adds;  // per unit, not direct: its shard was written before, so recv is added
  };
  void launch();
  // Whether the units' shards follow one another in `owned`, in this order.
  bool shards_adjacent(const std::vector<int>& units) const;
  void complete_front();

  const FlatPartition& part_;
  Communicator& group_;
  View1<float> owned_;
  GradBucketOptions opt_;
  BufferPool& pool_;
  std::vector<Piece> open_;
  std::int64_t open_elements_ = 0;
  std::deque<Bucket> inflight_;
  OwnedShardWrites writes_;
  std::int64_t started_ = 0, completed_during_compute_ = 0;
};

}  // namespace shardft
