#pragma once
// Which of a partition's gradient buffers hold the current sum's values. A sum (the step's, where a
// reducer accumulates the micro-batches in place; a micro-batch's, where it takes a fresh buffer per
// unit) starts with every buffer stale: the last sum's values, or pool memory. Nothing is zeroed up
// front. The model claims a parameter's buffer when it first reaches it in the sum:
//   to write (GradSink::grad_to_write: a weight's dW = dy^T x as a GEMM with beta 0, a norm weight's
//     column sums): the stale buffer is handed over to be overwritten, and never zeroed;
//   to add (GradSink::grad: the embedding's scatter, biases, LoRA factors): it is zeroed first.
// What no gradient reached (a parameter, a unit's padding) is zeroed when the unit's sum is settled,
// before anything reduces or reads it. A step so writes its gradient once, instead of zeroing all of
// it and then adding into it.
#include <vector>

#include "kernels/types.hpp"
#include "model/param_source.hpp"
#include "parallel/flat_partition.hpp"

namespace shardft {

// How the model will fill a gradient buffer it asks for: add into it, or write all of it.
enum class GradUse { add, write };

class GradSumState {
 public:
  explicit GradSumState(const FlatPartition& part);

  // A new sum of every unit; of one unit.
  void start();
  void start_unit(int unit);
  // `param`'s buffer `values` for `use`: where nothing of this sum has reached it yet, zeroed first for
  // an addition, or handed over with `overwrite` set for a write. Either way it is reached from now on.
  GradWrite claim(int param, Unmanaged1<float> values, GradUse use);
  // Zeroes what `unit`'s sum left stale in its buffer `unit_values` (the unit's padded extent): the
  // parameters not reached, and the padding.
  void settle(int unit, float* unit_values) const;

 private:
  const FlatPartition& part_;
  std::vector<char> reached_;  // per parameter of the layout: reached in its unit's current sum
};

}  // namespace shardft
