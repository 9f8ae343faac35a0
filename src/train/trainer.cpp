#include "train/trainer.hpp"

#include <chrono>

#include "kernels/elementwise.hpp"

namespace shardft {

ModelInputs to_model_inputs(const TokenBatch& b) {
  return upload_inputs(b.batch, b.seq, b.input_ids, b.position_ids, b.seq_ids, b.targets);
}

namespace {
std::int64_t count_real_tokens(const TokenBatch& b) {
  std::int64_t n = 0;
  for (auto id : b.input_ids) n += id != ByteTokenizer::kPad;
  return n;
}
}  // namespace

Trainer::Trainer(const TrainConfig& cfg, long total_steps)
    : cfg_(cfg),
      model_(cfg.model, cfg.bf16 ? ComputeDtype::bf16 : ComputeDtype::fp32),
      params_(model_.layout()),
      master_("master_weights", model_.layout().total_numel()),
      optimizer_(model_.layout(), AdamWConfig{cfg.adam_beta1, cfg.adam_beta2, cfg.adam_epsilon, cfg.weight_decay}) {
  init_params(model_.layout(), cfg.model, cfg.seed, master_);
  refresh_compute_weights();
  schedule_.type = cfg.lr_scheduler_type;
  schedule_.peak_lr = cfg.learning_rate;
  schedule_.total_steps = total_steps;
  schedule_.warmup_steps = resolve_warmup_steps(cfg.warmup_steps, cfg.warmup_ratio, total_steps);
  schedule_.min_lr_rate = cfg.min_lr > 0 ? cfg.min_lr / cfg.learning_rate : cfg.min_lr_rate;
}

void Trainer::refresh_compute_weights() {
  if (model_.dtype() == ComputeDtype::bf16) {
    round_to_bf16(master_, params_.weights());
  } else {
    Kokkos::deep_copy(params_.weights(), master_);
  }
}

StepStats Trainer::step(const std::vector<TokenBatch>& micro_batches) {
  const auto t0 = std::chrono::steady_clock::now();
  StepStats st;
  for (const auto& mb : micro_batches) {
    st.targets += mb.num_targets();
    st.tokens += count_real_tokens(mb);
  }
  Kokkos::deep_copy(params_.grads(), 0.f);
  double loss_sum = 0.0;
  if (st.targets > 0) {
    // Every micro-batch's loss is divided by the step's target count, so the accumulated gradient
    // is that of one big batch, whatever the split.
    for (const auto& mb : micro_batches) {
      loss_sum += model_.forward_backward(to_model_inputs(mb), params_, params_, static_cast<double>(st.targets)).loss_sum;
    }
  }
  st.loss = st.targets > 0 ? loss_sum / static_cast<double>(st.targets) : 0.0;
  st.grad_norm = clip_grad_norm(params_.grads(), cfg_.max_grad_norm);
  st.learning_rate = schedule_.at(optimizer_.steps_taken());
  optimizer_.step(master_, params_.grads(), st.learning_rate);
  refresh_compute_weights();
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return st;
}

}  // namespace shardft
