#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace shardft {

double LrSchedule::at(long step) const {
  if (step < warmup_steps) return peak_lr * static_cast<double>(step) / static_cast<double>(std::max(1L, warmup_steps));
  const double span = static_cast<double>(std::max(1L, total_steps - warmup_steps));
  const double progress = static_cast<double>(step - warmup_steps) / span;
  const double cosine = 0.5 * (1.0 + std::cos(M_PI * std::min(progress, 1.0)));
  if (type == "constant") return peak_lr;
  if (type == "linear") return peak_lr * std::max(0.0, static_cast<double>(total_steps - step) / span);
  if (type == "cosine") return peak_lr * cosine;
  if (type == "cosine_with_min_lr") return peak_lr * (min_lr_rate + (1.0 - min_lr_rate) * cosine);
  throw std::invalid_argument("unknown lr_scheduler_type '" + type + "'");
}

long resolve_warmup_steps(long warmup_steps, double warmup_ratio, long total_steps) {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<long>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

}  // namespace shardft
