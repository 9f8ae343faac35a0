#pragma once
// fp16's loss scale, with DeepSpeed's rules (deepspeed/runtime/fp16/loss_scaler.py, DynamicLossScaler):
// the loss (so every gradient flowing back) is multiplied by scale(); after backward the trainer unscales
// the gradient and tells update() whether any gradient on any rank was inf or NaN (the global gradient
// norm is then not finite, and every rank sees the same norm).
//   overflow: the step is skipped (no optimizer update). With hysteresis h, the first h - 1 overflows only
//             use up the hysteresis; then each overflow halves the scale, not below min_scale. An
//             overflow at min_scale fails the run (DeepSpeed's raise_error_at_min_scale).
//   no overflow: consecutive_hysteresis refills the hysteresis; the scale doubles whenever the steps since
//             the last overflow reach a multiple of window (and then the hysteresis is refilled).
// A static scale (loss_scale > 0) never changes; an overflowing step is still skipped, as DeepSpeed does.
#include <nlohmann/json.hpp>

#include "config/config_error.hpp"
#include "config/engine_sections.hpp"

namespace shardft {

class LossScaler {
 public:
  enum class Outcome { apply, skip, exhausted };  // exhausted: overflow at min_scale; the run must fail

  LossScaler() = default;  // disabled: scale 1, every step applied
  explicit LossScaler(const LossScalerConfig& cfg);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  long skipped_steps() const { return skipped_; }
  Outcome update(bool overflow);

  // The state a checkpoint keeps, so a resumed run continues with the same scale and counters.
  nlohmann::json state() const;
  // FormatError naming `where` when a field is missing or of the wrong type.
  void restore(const nlohmann::json& state, const std::string& where);

 private:
  bool enabled_ = false;
  LossScalerConfig cfg_;
  double scale_ = 1;
  long iter_ = 0;                // update() calls so far
  long last_overflow_iter_ = -1;
  int hysteresis_left_ = 1;
  long skipped_ = 0;
};

}  // namespace shardft
