#pragma once
// Learning-rate schedules with HF transformers' semantics (get_scheduler): the rate used by
// optimizer step `step` (0-based) of `total_steps`, after `warmup` linear warm-up steps.
//   warm-up:             lr * step / warmup
//   constant, constant_with_warmup:  lr  (HF's constant skips warm-up silently; here a warm-up a recipe
//                        asks for always runs, so both names mean HF's constant_with_warmup)
//   linear:              lr * (total - step) / (total - warmup)
//   cosine:              lr * max(0, 0.5 * (1 + cos(pi * 2 * num_cycles * progress))),
//                        progress = (step - warmup) / (total - warmup), num_cycles 0.5 (lr_scheduler_kwargs)
//   cosine_with_min_lr:  lr * (min_rate + (1 - min_rate) * that cosine)
//   cosine_with_restarts: 0 once progress >= 1, else lr * max(0, 0.5 * (1 + cos(pi * ((num_cycles * progress) mod 1)))),
//                        num_cycles 1
//   warmup_stable_decay: HF's get_wsd_schedule (the version with warmup_type / decay_type): with r = min_lr_ratio,
//                        warm-up lr * max(0, r + (1 - r) * f(step / warmup)), f = p (linear), 0.5 * (1 - cos(pi p))
//                        (cosine), 1 - sqrt(1 - p) (1-sqrt); then lr for num_stable_steps (default: total -
//                        warmup - num_decay_steps); then lr * max(0, r + (1 - r) * g(q)), q the decay's progress,
//                        g = 1 - q, 0.5 * (1 + cos(pi * 2 * num_cycles * q)) (cosine, the default), 1 - sqrt(q);
//                        after it lr * r
//
// DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR (deepspeed/runtime/lr_schedules.py, v0.19.6) as
// its engine runs them from a "scheduler" block: the scheduler is built at iteration -1 (which sets the
// optimizer's rate) and stepped once after every optimizer step, so optimizer step `step` runs at
// iteration i = step - 1. With W = max(2, warmup), T = total, lr = learning_rate:
//   warm-up fraction g = log(i + 1) / log(W)   (warmup_type log, DeepSpeed's default)
//                    g = i / W                 (warmup_type linear)
//   ds_warmup:         i < 0: min_lr;  i < W: min_lr + (lr - min_lr) * g;  after: min_lr + (lr - min_lr) * 1
//   ds_warmup_decay:   as ds_warmup during warm-up; after: min_lr + (lr - min_lr) * max(0, (T - i) / max(1, T - W))
//                      (toward warmup_min_lr, reached at i = T; a run of T steps ends at i = T - 2)
//   ds_warmup_cosine:  i < 0: 0 (DeepSpeed's scheduler reports 0 before its first step, whatever
//                      warmup_min_ratio says);  i < W: lr * (min_ratio + (1 - min_ratio) * g);
//                      after: lr * max(0, cos_min + (1 - cos_min) * 0.5 * (1 + cos(pi * p))),
//                      p = min(1, (i - W + 1) / max(1, T - W))
// The arithmetic follows DeepSpeed's operation order, so the rates agree to the last bits
// (tests/reference/make_deepspeed_lr.py, tests/unit/test_lr_schedule.cpp).
#include <string>

#include "config/config_error.hpp"
#include "config/engine_sections.hpp"

namespace shardft {

// The schedule's settings (config/engine_sections.hpp) and the rate they give each optimizer step.
struct LrSchedule : LrScheduleConfig {
  double at(long step) const;
};

// True for the lr_scheduler_type values that name DeepSpeed's schedules.
bool is_deepspeed_schedule(const std::string& type);


}  // namespace shardft
