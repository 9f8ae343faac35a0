#!/usr/bin/env python3
"""The loss transformers computes for an exported shardft model on plain-text samples.

Usage: check_hf_export.py MODEL_DIR TEXT_JSONL END_TOKEN [BEGIN_TOKEN]

MODEL_DIR is an HF directory (config.json, safetensors, tokenizer.json) as `shardft consolidate`
or the end of `shardft train` writes it. Each line of TEXT_JSONL is {"text": ...}; a sample is
encoded the way shardft renders a plain-text sample: [BEGIN_TOKEN] + tokenizer.json's encoding of
the text (no special tokens added) + END_TOKEN, every token after the first a target. Prints one
JSON line: {"loss": total cross-entropy / number of targets, "targets": n, "architecture": ...},
the same token-weighted mean as shardft's eval_loss.
"""

import json
import sys

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

import qwen3_compat

qwen3_compat.register()  # Qwen3 where the venv's transformers predates it
torch.set_num_threads(1)


def main():
    model_dir, data, end = sys.argv[1], sys.argv[2], sys.argv[3]
    begin = sys.argv[4] if len(sys.argv) > 4 else None
    tok = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    end_id = tok.token_to_id(end)
    assert end_id is not None, f"tokenizer has no {end}"
    total, count = 0.0, 0
    with open(data, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            ids = tok.encode(json.loads(line)["text"], add_special_tokens=False).ids + [end_id]
            if begin:
                ids = [tok.token_to_id(begin)] + ids
            x = torch.tensor([ids])
            with torch.no_grad():
                logits = model(input_ids=x).logits[0].double()
            total += torch.nn.functional.cross_entropy(logits[:-1], x[0, 1:], reduction="sum").item()
            count += len(ids) - 1
    print(json.dumps({"loss": total / count, "targets": count, "architecture": model.config.architectures[0]}))


if __name__ == "__main__":
    main()
