#pragma once
// lr_scheduler_kwargs (HF's key): a schedule's own settings as a mapping, e.g. {num_cycles: 3} for
// cosine_with_restarts or {num_decay_steps: 200, min_lr_ratio: 0.1} for warmup_stable_decay. The recipe
// table holds it as canonical JSON text (like datasets and role_map, config/data_keys.hpp); which keys a
// schedule takes is checked against lr_scheduler_type (HF passes them to its schedule function, which
// raises on one it does not take):
//   cosine               num_cycles (0.5: one half wave down)
//   cosine_with_min_lr   num_cycles, min_lr or min_lr_rate (as the keys of the same names)
//   cosine_with_restarts num_cycles (1: none; an integer)
//   warmup_stable_decay  num_decay_steps (needed), num_stable_steps (default: what warm-up and decay leave),
//                        min_lr_ratio, num_cycles, warmup_type and decay_type (linear | cosine | 1-sqrt)
#include <optional>
#include <string>

namespace shardft {

struct LrSchedulerKwargs {
  std::optional<double> num_cycles, min_lr, min_lr_rate, min_lr_ratio;
  std::optional<long> num_stable_steps, num_decay_steps;
  std::string warmup_type, decay_type;  // warmup_stable_decay's shapes; "" unset

  bool empty() const;
};

// Text (YAML flow or JSON; "" none) -> canonical JSON. std::invalid_argument naming the kwarg and the
// value expected.
std::string canonical_lr_scheduler_kwargs_text(const std::string& text);
LrSchedulerKwargs parse_lr_scheduler_kwargs_text(const std::string& text);

// "" where `type` takes every kwarg given (and has what it needs), else why not.
std::string lr_scheduler_kwargs_problem(const std::string& type, const LrSchedulerKwargs& kwargs);

}  // namespace shardft
