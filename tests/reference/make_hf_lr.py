#!/usr/bin/env python3
"""HF's learning-rate factors for the schedules lr_scheduler_kwargs configures: cosine with num_cycles,
cosine_with_restarts and warmup_stable_decay, from transformers' own schedule functions (4.46.3, the test
venv's: its warmup_stable_decay warms up linearly and decays along a cosine; the min_lr_ratio cases are
compared from the decay on, where the newer versions agree with it).

Usage: make_hf_lr.py > tests/reference/hf_lr_schedules.json
"""

import json

import torch
import transformers
from transformers import optimization as o


def factors(make, total):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=1.0)
    sched = make(opt)
    out = []
    for _ in range(total):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def main():
    total, warmup = 50, 5
    cases = [
        {"type": "cosine", "kwargs": {"num_cycles": 1.5}, "warmup": warmup, "total": total,
         "factors": factors(lambda opt: o.get_cosine_schedule_with_warmup(opt, warmup, total, num_cycles=1.5), total)},
        {"type": "cosine_with_restarts", "kwargs": {}, "warmup": warmup, "total": total,
         "factors": factors(lambda opt: o.get_cosine_with_hard_restarts_schedule_with_warmup(opt, warmup, total), total)},
        {"type": "cosine_with_restarts", "kwargs": {"num_cycles": 3}, "warmup": warmup, "total": total,
         "factors": factors(lambda opt: o.get_cosine_with_hard_restarts_schedule_with_warmup(opt, warmup, total, 3), total)},
        {"type": "warmup_stable_decay", "kwargs": {"num_stable_steps": 20, "num_decay_steps": 15}, "warmup": warmup,
         "total": total, "from_step": 0,
         "factors": factors(lambda opt: o.get_wsd_schedule(opt, warmup, 20, 15), total)},
        {"type": "warmup_stable_decay", "kwargs": {"num_stable_steps": 10, "num_decay_steps": 30, "min_lr_ratio": 0.1,
                                                   "num_cycles": 0.25}, "warmup": warmup, "total": total, "from_step": warmup,
         "factors": factors(lambda opt: o.get_wsd_schedule(opt, warmup, 10, 30, min_lr_ratio=0.1, num_cycles=0.25), total)},
    ]
    print(json.dumps({"transformers": transformers.__version__, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
