#!/usr/bin/env python3
"""DeepSpeed learning-rate fixtures: the rate each optimizer step of a run trains with when a
ds_config.json "scheduler" block (WarmupLR, WarmupDecayLR, WarmupCosineLR) drives it, saved to
deepspeed_lr.json next to this script. tests/unit/test_lr_schedule.cpp loads each case's ds_config
and recipe flags through shardft's config reader and checks every step's rate (1e-12 relative).

Regenerate with:  python3 tests/reference/make_deepspeed_lr.py
(plain Python 3, no packages). Cross-check against DeepSpeed's own module with
  .cache/hfvenv/bin/python tests/reference/make_deepspeed_lr.py --check-against DEEPSPEED_CHECKOUT
which imports DEEPSPEED_CHECKOUT/deepspeed/runtime/lr_schedules.py (needs torch; deepspeed's logger is
stubbed, nothing else of DeepSpeed is loaded), runs it the same way and requires identical doubles.

What is transcribed, from deepspeed/runtime/lr_schedules.py of DeepSpeed v0.19.6 (git edaa722,
2026-08-22; the WarmupCosineLR end clamp arrived in v0.19.3, the positive warmup_num_steps check in
v0.19.3, WarmupLR's warmup_max_lr defaulting to the optimizer's lr in v0.19.x):
  * WarmupLR / WarmupDecayLR: W = max(2, warmup_num_steps); before the first scheduler step
    (iteration -1) the rate is warmup_min_lr; at iteration i < W it is
    min + (max - min) * gamma, gamma = log(i + 1) / log(W) ("log", the default) or i / W ("linear");
    after the warm-up WarmupLR keeps gamma = 1 and WarmupDecayLR uses
    gamma = max(0, (T - i) / max(1, T - W)).
  * WarmupCosineLR: rates are ratios of the optimizer's lr; iteration -1 gives 0; warm-up ratio
    warmup_min_ratio + g * (1 - warmup_min_ratio) with g as above; after it
    max(0, cos_min + (1 - cos_min) * (1 + cos(pi * min(1, (i - W + 1) / max(1, T - W)))) / 2).
  * The engine (deepspeed/runtime/engine.py, _take_model_step) builds the scheduler at iteration -1,
    whose constructor writes the iteration -1 rate into the optimizer, and calls scheduler.step()
    after every optimizer step that did not overflow: optimizer step s (0-based) trains with the rate
    of iteration s - 1.
  * HF's Trainer fills "auto" (transformers integrations/deepspeed.py): warmup_min_lr -> 0,
    warmup_max_lr and optimizer.params.lr -> learning_rate, warmup_num_steps -> warmup_steps or
    ceil(warmup_ratio * total), total_num_steps -> the run's optimizer steps.
The expressions below keep DeepSpeed's operation order so the doubles, not just the reals, agree.
"""

import argparse
import importlib.util
import json
import math
import os
import sys
import types

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "deepspeed_lr.json")

# Each case: the ds_config a user writes, the recipe flags a shardft run adds (HF TrainingArguments),
# and the run's length. Between them they cover both warm-up shapes, each scheduler, warmup_min_lr > 0,
# warmup_num_steps 1 (DeepSpeed warms up over 2), totals that neither divide nor exceed the warm-up,
# runs past total_num_steps (decay to the floor, cosine clamp), "auto" and left-out params.
CASES = [
    {"name": "warmup_log", "steps": 15, "recipe": [],
     "ds_config": {"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                   "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 1e-3,
                                                                "warmup_num_steps": 10}}}},
    {"name": "warmup_linear_min_lr", "steps": 12, "recipe": [],
     "ds_config": {"scheduler": {"type": "WarmupLR", "params": {
         "warmup_min_lr": 1e-5, "warmup_max_lr": 3e-4, "warmup_num_steps": 7, "warmup_type": "linear"}}}},
    {"name": "warmup_one_step", "steps": 5, "recipe": [],
     "ds_config": {"scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 2e-4, "warmup_num_steps": 1}}}},
    {"name": "warmup_defaults", "steps": 12, "recipe": ["--learning_rate=5e-4"],
     "ds_config": {"scheduler": {"type": "WarmupLR"}}},
    {"name": "decay_log", "steps": 23, "recipe": [],
     "ds_config": {"scheduler": {"type": "WarmupDecayLR", "params": {
         "warmup_min_lr": 0, "warmup_max_lr": 3e-5, "warmup_num_steps": 5, "total_num_steps": 23}}}},
    {"name": "decay_linear_min_lr_past_total", "steps": 20, "recipe": [],
     "ds_config": {"scheduler": {"type": "WarmupDecayLR", "params": {
         "warmup_min_lr": 2e-6, "warmup_max_lr": 1e-4, "warmup_num_steps": 4, "total_num_steps": 17,
         "warmup_type": "linear"}}}},
    {"name": "decay_total_below_warmup", "steps": 8, "recipe": [],
     "ds_config": {"scheduler": {"type": "WarmupDecayLR", "params": {
         "warmup_max_lr": 1e-3, "warmup_num_steps": 5, "total_num_steps": 3}}}},
    {"name": "decay_auto_hf", "steps": 37,
     "recipe": ["--learning_rate=2e-4", "--warmup_ratio=0.1", "--max_steps=37"],
     "ds_config": {"optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
                   "scheduler": {"type": "WarmupDecayLR", "params": {
                       "warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto",
                       "total_num_steps": "auto", "warmup_type": "linear"}}}},
    {"name": "cosine_log_default_floor", "steps": 31, "recipe": [],
     "ds_config": {"optimizer": {"type": "AdamW", "params": {"lr": 3e-4}},
                   "scheduler": {"type": "WarmupCosineLR", "params": {
                       "total_num_steps": 29, "warmup_num_steps": 6}}}},
    {"name": "cosine_linear_ratios_past_total", "steps": 12, "recipe": ["--learning_rate=1e-3"],
     "ds_config": {"scheduler": {"type": "WarmupCosineLR", "params": {
         "total_num_steps": 10, "warmup_min_ratio": 0.1, "warmup_num_steps": 3, "cos_min_ratio": 0.05,
         "warmup_type": "linear"}}}},
    {"name": "cosine_auto_hf", "steps": 20,
     "recipe": ["--learning_rate=1e-4", "--warmup_steps=5", "--max_steps=20"],
     "ds_config": {"optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
                   "scheduler": {"type": "WarmupCosineLR", "params": {
                       "total_num_steps": "auto", "warmup_min_ratio": 0, "warmup_num_steps": "auto",
                       "cos_min_ratio": 0.0001, "warmup_type": "log"}}}},
]

DEFAULT_LR = 3e-3  # shardft's learning_rate when neither recipe nor file sets it (TrainConfig)


def recipe_value(case, key, default):
    for flag in case["recipe"]:
        name, _, value = flag[2:].partition("=")
        if name == key:
            return value
    return default


def hf_fill(case):
    """The scheduler's constructor arguments and the optimizer's lr after HF's Trainer fills "auto"
    (the recipe flags stand in for TrainingArguments)."""
    cfg = case["ds_config"]
    lr = float(recipe_value(case, "learning_rate", DEFAULT_LR))
    opt_lr = cfg.get("optimizer", {}).get("params", {}).get("lr", lr)
    opt_lr = lr if opt_lr == "auto" else opt_lr
    total = int(recipe_value(case, "max_steps", case["steps"]))
    warmup = int(recipe_value(case, "warmup_steps", 0)) or math.ceil(
        float(recipe_value(case, "warmup_ratio", 0)) * total)
    fills = {"warmup_min_lr": 0, "warmup_max_lr": lr, "warmup_num_steps": warmup, "total_num_steps": total}
    params = {k: (fills[k] if v == "auto" else v) for k, v in cfg["scheduler"].get("params", {}).items()}
    return cfg["scheduler"]["type"], params, opt_lr


class Optimizer:
    """Just what the schedulers touch: one parameter group's lr."""

    def __init__(self, lr):
        self.param_groups = [{"lr": lr}]


# ---- the transcription ------------------------------------------------------------------------

class WarmupLR:
    def __init__(self, optimizer, warmup_min_lr=0.0, warmup_max_lr=None, warmup_num_steps=1000,
                 warmup_type="log"):
        if not isinstance(warmup_num_steps, int) or warmup_num_steps <= 0:
            raise ValueError("warmup_num_steps must be a positive integer")
        self.optimizer = optimizer
        if warmup_max_lr is None:
            warmup_max_lr = optimizer.param_groups[0]["lr"]
        self.min_lr = warmup_min_lr
        self.delta = warmup_max_lr - warmup_min_lr
        self.warmup = max(2, warmup_num_steps)
        self.warmup_type = warmup_type
        self.inv_log = 1.0 / math.log(self.warmup)
        self.it = -1
        self.optimizer.param_groups[0]["lr"] = self.rate()

    def warmup_fraction(self):
        if self.warmup_type == "log":
            return self.inv_log * math.log(self.it + 1)
        return self.it / self.warmup

    def gamma(self):
        return self.warmup_fraction() if self.it < self.warmup else 1.0

    def rate(self):
        if self.it < 0:
            return self.min_lr
        return self.min_lr + (self.delta * self.gamma())

    def step(self):
        self.it += 1
        self.optimizer.param_groups[0]["lr"] = self.rate()


class WarmupDecayLR(WarmupLR):
    def __init__(self, optimizer, total_num_steps, warmup_min_lr=0.0, warmup_max_lr=0.001,
                 warmup_num_steps=1000, warmup_type="log"):
        self.total = total_num_steps
        super().__init__(optimizer, warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type)

    def gamma(self):
        if self.it < self.warmup:
            return self.warmup_fraction()
        return max(0.0, float(self.total - self.it) / float(max(1.0, self.total - self.warmup)))


class WarmupCosineLR(WarmupLR):
    def __init__(self, optimizer, total_num_steps, warmup_min_ratio=0.0, warmup_num_steps=1000,
                 cos_min_ratio=0.0001, warmup_type="log"):
        self.total = total_num_steps
        self.warmup_min_ratio = warmup_min_ratio
        self.cos_min_ratio = cos_min_ratio
        self.base_lr = optimizer.param_groups[0]["lr"]
        super().__init__(optimizer, 0.0, None, warmup_num_steps, warmup_type)

    def rate(self):
        if self.it < 0:
            return 0.0
        if self.it < self.warmup:
            ratio = self.warmup_min_ratio + self.warmup_fraction() * (1.0 - self.warmup_min_ratio)
        else:
            progress = min(1.0, (self.it - self.warmup + 1) / max(1, self.total - self.warmup))
            half = (1 + math.cos(math.pi * progress)) / 2
            ratio = max(0.0, self.cos_min_ratio + (1.0 - self.cos_min_ratio) * half)
        return self.base_lr * ratio


def run(schedulers, case):
    """The rate of each optimizer step, stepping the scheduler as DeepSpeed's engine does."""
    name, params, opt_lr = hf_fill(case)
    optimizer = Optimizer(opt_lr)
    scheduler = getattr(schedulers, name)(optimizer, **params)
    rates = []
    for _ in range(case["steps"]):
        rates.append(float(optimizer.param_groups[0]["lr"]))  # what optimizer.step() reads
        scheduler.step()
    return rates


def deepspeed_module(checkout):
    """DeepSpeed's own lr_schedules.py, with its logger stubbed."""
    stub = types.ModuleType("deepspeed")
    utils = types.ModuleType("deepspeed.utils")
    utils.logger = types.SimpleNamespace(warning=lambda *a, **k: None, info=lambda *a, **k: None)
    stub.utils = utils
    sys.modules.update({"deepspeed": stub, "deepspeed.utils": utils})
    path = os.path.join(checkout, "deepspeed", "runtime", "lr_schedules.py")
    spec = importlib.util.spec_from_file_location("ds_lr_schedules", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torch_run(module, case):
    import torch
    name, params, opt_lr = hf_fill(case)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=opt_lr)
    scheduler = getattr(module, name)(optimizer, **params)
    rates = []
    for _ in range(case["steps"]):
        rates.append(float(optimizer.param_groups[0]["lr"]))
        scheduler.step()
    return rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check-against", metavar="DEEPSPEED_CHECKOUT",
                        help="also run DeepSpeed's own lr_schedules.py and require identical rates")
    args = parser.parse_args()
    this = sys.modules[__name__]
    out = []
    for case in CASES:
        rates = run(this, case)
        assert all(r >= 0 for r in rates), case["name"]
        if args.check_against:
            theirs = torch_run(deepspeed_module(args.check_against), case)
            assert theirs == rates, (case["name"], theirs, rates)
        out.append({"name": case["name"], "ds_config": case["ds_config"], "recipe": case["recipe"],
                    "steps": case["steps"], "learning_rate": rates})
    with open(OUT, "w") as f:
        json.dump({"source": "tests/reference/make_deepspeed_lr.py (DeepSpeed v0.19.6 lr_schedules.py)",
                   "cases": out}, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: {len(out)} cases" + (" (identical to DeepSpeed's module)" if args.check_against else ""))


if __name__ == "__main__":
    main()
