#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "config/lr_scheduler_kwargs.hpp"

namespace shardft {
namespace {

// DeepSpeed's rate at scheduler iteration i (the header's formulas). Each expression keeps the
// operation order of lr_schedules.py (e.g. min + delta * gamma even where gamma is 1) so that the
// doubles match DeepSpeed's, not just the real numbers.
double deepspeed_rate(const LrSchedule& s, long i) {
  if (s.type == "ds_warmup_cosine" && i < 0) return 0.0;
  if (i < 0) return s.warmup_min_lr;
  // DeepSpeed rejects warmup_num_steps <= 0 and then warms up over at least 2 iterations.
  const long w = std::max(2L, s.warmup_steps);
  double g = 1.0;  // the warm-up fraction, or the decay factor after it
  if (i < w) {
    if (s.warmup_type == "log") {
      g = (1.0 / std::log(static_cast<double>(w))) * std::log(static_cast<double>(i + 1));
    } else if (s.warmup_type == "linear") {
      g = static_cast<double>(i) / static_cast<double>(w);
    } else {
      throw std::invalid_argument("unknown warmup_type '" + s.warmup_type + "'");
    }
    if (s.type == "ds_warmup_cosine") return s.peak_lr * (s.warmup_min_ratio + g * (1.0 - s.warmup_min_ratio));
  } else if (s.type == "ds_warmup_decay") {
    g = std::max(0.0, static_cast<double>(s.total_steps - i) /
                          std::max(1.0, static_cast<double>(s.total_steps - w)));
  } else if (s.type == "ds_warmup_cosine") {
    const double progress = std::min(1.0, static_cast<double>(i - w + 1) /
                                              static_cast<double>(std::max(1L, s.total_steps - w)));
    const double half_cosine = (1.0 + std::cos(M_PI * progress)) / 2.0;
    return s.peak_lr * std::max(0.0, s.cos_min_ratio + (1.0 - s.cos_min_ratio) * half_cosine);
  }
  return s.warmup_min_lr + (s.peak_lr - s.warmup_min_lr) * g;
}

// warmup_stable_decay's shapes: the warm-up's rise f(p) and the decay's fall g(q), both from 0 to 1.
double wsd_shape(const std::string& shape, double p, bool rising, double num_cycles) {
  if (shape == "linear") return rising ? p : 1.0 - p;
  if (shape == "1-sqrt") return rising ? 1.0 - std::sqrt(1.0 - p) : 1.0 - std::sqrt(p);
  if (shape == "cosine") {
    return rising ? 0.5 * (1.0 - std::cos(M_PI * p)) : 0.5 * (1.0 + std::cos(M_PI * num_cycles * 2.0 * p));
  }
  throw std::invalid_argument("unknown warmup_stable_decay shape '" + shape + "'");
}

double wsd_factor(const LrSchedule& s, long step) {
  const double r = s.min_lr_ratio;
  if (step < s.warmup_steps) {
    const double p = static_cast<double>(step) / static_cast<double>(std::max(1L, s.warmup_steps));
    return std::max(0.0, wsd_shape(s.wsd_warmup, p, true, s.num_cycles) * (1.0 - r) + r);
  }
  if (step < s.warmup_steps + s.stable_steps) return 1.0;
  if (step < s.warmup_steps + s.stable_steps + s.decay_steps) {
    const double q = static_cast<double>(step - s.warmup_steps - s.stable_steps) /
                     static_cast<double>(std::max(1L, s.decay_steps));
    return std::max(0.0, wsd_shape(s.wsd_decay, q, false, s.num_cycles) * (1.0 - r) + r);
  }
  return r;
}

}  // namespace

bool is_deepspeed_schedule(const std::string& type) {
  return type == "ds_warmup" || type == "ds_warmup_decay" || type == "ds_warmup_cosine";
}

double LrSchedule::at(long step) const {
  if (is_deepspeed_schedule(type)) return deepspeed_rate(*this, step - 1);
  if (type == "warmup_stable_decay") return peak_lr * wsd_factor(*this, step);
  if (step < warmup_steps) return peak_lr * static_cast<double>(step) / static_cast<double>(std::max(1L, warmup_steps));
  const double span = static_cast<double>(std::max(1L, total_steps - warmup_steps));
  const double progress = static_cast<double>(step - warmup_steps) / span;
  const double cosine = std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * num_cycles * 2.0 * std::min(progress, 1.0))));
  if (type == "constant" || type == "constant_with_warmup") return peak_lr;
  if (type == "linear") return peak_lr * std::max(0.0, static_cast<double>(total_steps - step) / span);
  if (type == "cosine") return peak_lr * cosine;
  if (type == "cosine_with_min_lr") return peak_lr * (min_lr_rate + (1.0 - min_lr_rate) * cosine);
  if (type == "cosine_with_restarts") {
    if (progress >= 1.0) return 0.0;
    return peak_lr * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * std::fmod(num_cycles * progress, 1.0))));
  }
  throw std::invalid_argument("unknown lr_scheduler_type '" + type + "'");
}

}  // namespace shardft
