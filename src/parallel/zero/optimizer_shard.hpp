#pragma once
// The optimizer's state for the region of the model this rank owns, all fp32: the master weights,
// AdamW's two moments and the step count; and the step's global gradient norm and clip.
// The clip is deferred: clip_grad_norm computes its factor on the device, and step()'s one AdamW launch
// multiplies each gradient element by it as it reads it, so the step reads the gradient once (no pass
// that scales it in place). Whatever else reads the gradient first applies the factor in place
// (apply_pending_clip) and so sees the clipped gradient, the same bits clipping in place would leave.
// Overlapped (enable_overlap), the update runs unit by unit on a queue of its own (kernels/side_queue),
// each unit marked when done, so that the next step's forward, which waits for a unit only before it
// reads the unit's weights (wait_for_unit), overlaps the rest of the update.
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "kernels/adamw.hpp"
#include "kernels/flat_runs.hpp"
#include "kernels/side_queue.hpp"
#include "kernels/types.hpp"
#include "parallel/zero/zero_config.hpp"

namespace shardft {

class OptimizerShard {
 public:
  // `norm_group`: the ranks whose owned regions together make the model (the shard group where the
  // state is sharded), over which the gradient norm is summed; nullptr where one rank owns it all.
  OptimizerShard(std::int64_t owned_numel, const ZeroConfig& cfg, Communicator* norm_group);

  // The update's tables (kernels/flat_runs.hpp), made once the compute weights exist: `decay` holds
  // the owned pieces, value 1 where they take weight decay (norms and biases take none: HF Trainer's
  // rule); `copy`, where the compute weights are a copy of the master weights (compute_is_copy), the
  // same pieces with the offset of their compute copy as well (adamw_copy_runs), else empty.
  void set_runs(FlatRuns decay, FlatRuns copy, bool compute_is_copy);
  // From now on each step updates unit by unit on the side queue: unit_runs[u] is the part of the
  // update's table (the copy table where the compute weights are a copy, else the decay table) that lies
  // in unit u, in the units' forward order.
  // gemm_sm_reserve: SMs the compute stream's GEMMs leave to the update while it runs (SideQueue).
  void enable_overlap(std::vector<FlatRuns> unit_runs, int gemm_sm_reserve = 0);
  bool overlapped() const { return side_ != nullptr; }
  std::string overlap_description() const { return side_ ? side_->describe() : std::string(); }
  // The compute stream's work issued from now on follows the last update of unit u; of every unit.
  // Nothing to wait for where the update is not overlapped (or on the host backends).
  void wait_for_unit(int unit);
  void wait_for_update();

  View1<float> master() const { return master_; }
  View1<float> exp_avg() const { return exp_avg_; }
  View1<float> exp_avg_sq() const { return exp_avg_sq_; }
  long steps() const { return step_; }
  void set_steps(long steps) { step_ = steps; }

  // A new step: the last step's clip factor no longer applies.
  void begin_step() { clip_pending_ = false; }
  // The global norm of `grad` (the owned region's reduced gradient), squared, into norm_sq(0), and the
  // clip factor for max_norm (<= 0: no clip), on the device: nothing is read back.
  void clip_grad_norm(View1<float> grad, double max_norm, Unmanaged1<double> norm_sq);
  // The deferred clip in place, for readers of the gradient other than the optimizer step.
  void apply_pending_clip(View1<float> grad);
  // One AdamW launch over the owned region at learning rate lr (overlapped: one per unit, on the side
  // queue, after the compute work issued so far), applying a pending clip as it reads the gradient (which
  // stays unclipped in memory), and writing `compute` as it updates where the compute weights are a copy
  // (set_runs said so; else `compute` is the master itself, left alone).
  void step(double lr, View1<float> grad, const ComputeWeights& compute);

  std::int64_t bytes() const { return 4 * static_cast<std::int64_t>(3 * master_.extent(0)); }

 private:
  AdamWHyper hyper(double lr) const;

  ZeroConfig cfg_;
  Communicator* norm_group_;
  View1<float> master_, exp_avg_, exp_avg_sq_;
  View1<float> clip_factor_;   // clip_grad_norm's factor (a device scalar), while clip_pending_
  bool clip_pending_ = false;  // the gradient is still to be multiplied by clip_factor_
  FlatRuns decay_runs_, copy_runs_;
  bool has_copy_ = false;
  std::vector<FlatRuns> unit_runs_;   // enable_overlap's tables
  std::unique_ptr<SideQueue> side_;   // where the overlapped update runs
  long step_ = 0;
};

}  // namespace shardft
