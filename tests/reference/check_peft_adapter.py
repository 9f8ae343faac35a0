#!/usr/bin/env python3
"""Loads a LoRA adapter with PEFT and prints the loss it gives on a fixed batch.

  check_peft_adapter.py BASE_DIR ADAPTER_DIR BATCH_JSON BATCH_KEY [MERGED_DIR]

BASE_DIR     a Hugging Face model folder (config.json + safetensors), loaded in fp32
ADAPTER_DIR  a PEFT adapter folder (adapter_config.json + adapter_model.safetensors)
BATCH_JSON   a JSON file whose BATCH_KEY entry holds input_ids, attention_mask and labels
             (HF-style unshifted labels, -100 = ignored), like tests/reference/hf/batch.json
MERGED_DIR   optional: a full model folder, e.g. `consolidate --merge_adapters` output

Prints one JSON line on stdout:
  {"loss": PeftModel.from_pretrained(base, adapter)'s loss on the batch (transformers' causal-LM loss),
   "merged_loss": the same after merge_and_unload(),
   "full_loss": AutoModelForCausalLM.from_pretrained(MERGED_DIR)'s loss      (only with MERGED_DIR),
   "tensors": how many adapter tensors the file holds}

PEFT only warns about adapter tensors it cannot place (and leaves the modules it finds no tensor for
at their initial values), so this script checks the match itself: every tensor of the file must land
on one of the model's LoRA parameters with its value, and every LoRA parameter must come from the file;
otherwise it names the tensors and exits 1. So does a key of adapter_config.json that
LoraConfig does not know (peft 0.13.2 rejects them). Usage errors exit 2.

Run with the venv of jobs/install-test-deps.sh (.cache/hfvenv: torch 1.13, transformers 4.46.3,
peft 0.13.2). tests/reference/make_peft_fixtures.py uses it to check its own fixtures.
"""

import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import qwen3_compat  # noqa: E402  (a Qwen3 base loads under transformers 4.46 too)

qwen3_compat.register()
from peft import PeftModel  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

ADAPTER_NAME = "default"


def saved_name(param_name):
    """PEFT's in-memory LoRA parameter name -> the name save_pretrained writes (adapter name dropped)."""
    return param_name.replace(f".{ADAPTER_NAME}.", ".")


def load_batch(batch_json, key):
    with open(batch_json, encoding="utf-8") as f:
        batches = json.load(f)
    if key not in batches:
        raise KeyError(f"{batch_json}: no batch '{key}' (has {sorted(batches)})")
    b = batches[key]
    return {k: torch.tensor(b[k], dtype=torch.long) for k in ("input_ids", "attention_mask", "labels")}


def load_base(base_dir, dtype=torch.float32):
    return AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=dtype).eval()


def adapter_tensors(adapter_dir):
    path = os.path.join(adapter_dir, "adapter_model.safetensors")
    if os.path.exists(path):
        return load_file(path)
    path = os.path.join(adapter_dir, "adapter_model.bin")
    if os.path.exists(path):
        return torch.load(path, map_location="cpu")
    raise FileNotFoundError(f"{adapter_dir}: neither adapter_model.safetensors nor adapter_model.bin")


def verify_loaded(model, tensors, adapter_dir):
    """Every adapter tensor landed on a LoRA parameter with its value, and nothing else is LoRA."""
    params = {saved_name(n): p for n, p in model.named_parameters() if ".lora_" in n}
    problems = []
    for name in sorted(set(tensors) - set(params)):
        problems.append(f"{name}: in the adapter file, but the model has no such LoRA parameter")
    for name in sorted(set(params) - set(tensors)):
        problems.append(f"{name}: LoRA parameter of the model, missing from the adapter file")
    for name in sorted(set(params) & set(tensors)):
        p, t = params[name], tensors[name]
        if tuple(p.shape) != tuple(t.shape):
            problems.append(f"{name}: shape {list(t.shape)} in the file, {list(p.shape)} in the model")
        elif not torch.equal(p.detach().cpu(), t.to(p.dtype)):
            problems.append(f"{name}: the model's value differs from the file's")
    if problems:
        raise ValueError(f"{adapter_dir}: adapter does not match the model:\n  " + "\n  ".join(problems))


def batch_loss(model, batch):
    with torch.no_grad():
        return model(**batch).loss.item()


def check(base_dir, adapter_dir, batch, merged_dir=None, dtype=torch.float32):
    """The numbers the script prints, as a dict (make_peft_fixtures.py calls this)."""
    model = PeftModel.from_pretrained(load_base(base_dir, dtype), adapter_dir).eval()
    tensors = adapter_tensors(adapter_dir)
    verify_loaded(model, tensors, adapter_dir)
    out = {"loss": batch_loss(model, batch)}
    merged = model.merge_and_unload()
    if any(".lora_" in n for n, _ in merged.named_parameters()):
        raise RuntimeError("merge_and_unload() left LoRA parameters in the model")
    out["merged_loss"] = batch_loss(merged, batch)
    if merged_dir is not None:
        out["full_loss"] = batch_loss(load_base(merged_dir, dtype), batch)
    out["tensors"] = len(tensors)
    return out


def main(argv):
    if len(argv) not in (5, 6):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    base_dir, adapter_dir, batch_json, key = argv[1:5]
    merged_dir = argv[5] if len(argv) == 6 else None
    torch.set_num_threads(1)
    try:
        batch = load_batch(batch_json, key)
    except (OSError, KeyError, ValueError) as e:
        print(f"check_peft_adapter: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 2
    try:
        result = check(base_dir, adapter_dir, batch, merged_dir)
    except (OSError, ValueError, RuntimeError, TypeError) as e:  # TypeError: unknown adapter_config key
        print(f"check_peft_adapter: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
