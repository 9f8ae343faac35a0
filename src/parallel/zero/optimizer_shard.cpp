#include "parallel/zero/optimizer_shard.hpp"

#include <string>
#include <utility>

#include "kernels/elementwise.hpp"

namespace shardft {

OptimizerShard::OptimizerShard(std::int64_t owned_numel, const ZeroConfig& cfg, Communicator* norm_group)
    : cfg_(cfg),
      norm_group_(norm_group),
      master_(std::string("zero_master"), owned_numel),
      exp_avg_(std::string("zero_exp_avg"), owned_numel),
      exp_avg_sq_(std::string("zero_exp_avg_sq"), owned_numel),
      clip_factor_(std::string("zero_clip_factor"), 1) {}

void OptimizerShard::set_runs(FlatRuns decay, FlatRuns copy, bool compute_is_copy) {
  decay_runs_ = std::move(decay);
  copy_runs_ = std::move(copy);
  has_copy_ = compute_is_copy;
}

void OptimizerShard::enable_overlap(std::vector<FlatRuns> unit_runs, int gemm_sm_reserve) {
  unit_runs_ = std::move(unit_runs);
  side_ = std::make_unique<SideQueue>(static_cast<int>(unit_runs_.size()), gemm_sm_reserve);
}

void OptimizerShard::wait_for_unit(int unit) {
  if (side_) side_->wait_for(unit);
}

void OptimizerShard::wait_for_update() {
  if (side_) side_->wait_for_all();
}

void OptimizerShard::clip_grad_norm(View1<float> grad, double max_norm, Unmanaged1<double> norm_sq) {
  wait_for_update();  // the clip factor is rewritten below: the last update (all of it) has read it
  apply_pending_clip(grad);  // a second call measures the gradient the first one clipped
  sum_squares(grad, norm_sq);
  if (norm_group_) norm_group_->all_reduce(norm_sq.data(), norm_sq.data(), 1, DType::f64, ReduceOp::sum);
  if (!(max_norm > 0)) return;
  clip_factor(norm_sq, max_norm, clip_factor_);  // clip_to_norm's factor, left for step() to apply
  clip_pending_ = true;
}

void OptimizerShard::apply_pending_clip(View1<float> grad) {
  if (!clip_pending_) return;
  wait_for_update();  // an overlapped update applies the factor as it reads the gradient
  apply_clip_factor(grad, clip_factor_);
  clip_pending_ = false;
}

AdamWHyper OptimizerShard::hyper(double lr) const {
  AdamWHyper h;
  h.lr = static_cast<float>(lr);
  h.beta1 = static_cast<float>(cfg_.adam_beta1);
  h.beta2 = static_cast<float>(cfg_.adam_beta2);
  h.eps = static_cast<float>(cfg_.adam_epsilon);
  h.step = step_;
  h.weight_decay = static_cast<float>(cfg_.weight_decay);  // where the decay runs say the parameter takes it
  return h;
}

void OptimizerShard::step(double lr, View1<float> grad, const ComputeWeights& compute) {
  ++step_;
  const AdamWHyper h = hyper(lr);
  const Unmanaged1<const float> clip = clip_pending_ ? Unmanaged1<const float>(clip_factor_.data(), 1) : Unmanaged1<const float>();
  auto update = [&](const ExecSpace& space, const FlatRuns& runs) {
    if (has_copy_) {
      adamw_update_runs(space, h, runs, master_, grad, exp_avg_, exp_avg_sq_, clip, compute);
    } else {
      adamw_update_runs(space, h, runs, master_, grad, exp_avg_, exp_avg_sq_, clip);
    }
  };
  if (!side_) {
    update(ExecSpace(), has_copy_ ? copy_runs_ : decay_runs_);
    return;
  }
  side_->follow_compute();  // the gradient, its clip factor and the weights' last readers
  for (std::size_t u = 0; u < unit_runs_.size(); ++u) {
    // A unit that owns nothing has no update for the forward to wait for; a mark left pending would also
    // keep optimizer_overlap_sms's SMs from the GEMMs until the next step's clip.
    if (unit_runs_[u].count() == 0) continue;
    update(side_->space(), unit_runs_[u]);
    side_->mark(static_cast<int>(u));
  }
}

}  // namespace shardft
