#!/usr/bin/env python3
"""Cross-checks the Qwen3 fixture against transformers' own Qwen3ForCausalLM.

The test venv's transformers (4.46, on Debian's torch 1.13) predates Qwen3, so make_hf_head_dim_models.py
builds tiny_qwen3 through qwen3_compat.py. This script, run with a transformers that has Qwen3
(>= 4.51, which needs torch >= 2), loads hf/tiny_qwen3 with transformers' own classes and compares its
fp32 loss and float64 gradients on the fixture batch with hf/batch_grads.json: the compat module and
transformers must agree to 1e-6 relative.

  python3 -m venv /tmp/qwen3venv && /tmp/qwen3venv/bin/pip install torch==2.5.1 transformers==4.51.3
  /tmp/qwen3venv/bin/python tests/reference/check_qwen3_reference.py
"""

import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, Qwen3ForCausalLM  # ImportError: this transformers has no Qwen3

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    fixture = json.load(open(os.path.join(HERE, "hf", "batch_grads.json")))["tiny_qwen3"]
    model = AutoModelForCausalLM.from_pretrained(os.path.join(HERE, "hf", "tiny_qwen3"), torch_dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    assert isinstance(model, Qwen3ForCausalLM), type(model)
    ids, mask, labels = (torch.tensor(fixture[k]) for k in ("input_ids", "attention_mask", "labels"))
    with torch.no_grad():
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
    model = model.double()
    loss64 = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss64.backward()
    worst = abs(loss - fixture["loss"]) / abs(fixture["loss"])
    print(f"loss: transformers {loss:.9g}, fixture {fixture['loss']:.9g}")
    for name, p in model.named_parameters():
        want = fixture["grads"][name]
        flat = p.grad.detach().flatten()
        n = flat.numel()
        assert n == want["numel"], (name, n, want["numel"])
        idx = range(n) if len(want["values"]) == n else [i * n // len(want["values"]) for i in range(len(want["values"]))]
        got = torch.tensor([flat[i].item() for i in idx], dtype=torch.float64)
        ref = torch.tensor(want["values"], dtype=torch.float64)
        rel = ((got - ref).norm() / max(ref.norm().item(), 1e-30)).item()
        norm_rel = abs(flat.norm().item() - want["norm"]) / want["norm"]
        worst = max(worst, rel, norm_rel)
        print(f"{name:45s} sampled values {rel:.2e}, norm {norm_rel:.2e}")
    print(f"worst relative difference {worst:.2e}")
    return 0 if worst < 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
