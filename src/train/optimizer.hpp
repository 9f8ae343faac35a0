#pragma once
// AdamW over the fp32 master weights, parameter by parameter so that norm weights skip weight
// decay (HF Trainer's rule: no decay for biases and normalisation weights).
#include "kernels/adamw.hpp"
#include "model/param_layout.hpp"

namespace shardft {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

class AdamW {
 public:
  AdamW(const ParamLayout& layout, const AdamWConfig& cfg);
  // One update of master from grads at learning rate lr; advances the step count.
  void step(View1<float> master, View1<const float> grads, double lr);
  long steps_taken() const { return step_; }
  View1<float> exp_avg() const { return m_; }
  View1<float> exp_avg_sq() const { return v_; }

 private:
  const ParamLayout& layout_;
  AdamWConfig cfg_;
  View1<float> m_, v_;
  long step_ = 0;
};

// Global L2 norm of the gradient; when max_norm > 0 and the norm exceeds it, the gradient is scaled
// by max_norm / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_). Returns the norm before clipping.
double clip_grad_norm(View1<float> grads, double max_norm);

}  // namespace shardft
