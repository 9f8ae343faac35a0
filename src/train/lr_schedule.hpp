#pragma once
// Learning-rate schedules with HF transformers' semantics (get_scheduler): the rate used by
// optimizer step `step` (0-based) of `total_steps`, after `warmup` linear warm-up steps.
//   warm-up:             lr * step / warmup
//   constant:            lr
//   linear:              lr * (total - step) / (total - warmup)
//   cosine:              lr * 0.5 * (1 + cos(pi * progress)),   progress = (step - warmup) / (total - warmup)
//   cosine_with_min_lr:  lr * (min_rate + (1 - min_rate) * 0.5 * (1 + cos(pi * progress)))
#include <string>

namespace shardft {

struct LrSchedule {
  std::string type = "constant";
  double peak_lr = 1e-3;
  long warmup_steps = 0;
  long total_steps = 1;
  double min_lr_rate = 0.0;  // cosine_with_min_lr only

  double at(long step) const;
};

// Warm-up steps from warmup_steps, or from warmup_ratio of the run when warmup_steps is 0 (HF: ceil).
long resolve_warmup_steps(long warmup_steps, double warmup_ratio, long total_steps);

}  // namespace shardft
