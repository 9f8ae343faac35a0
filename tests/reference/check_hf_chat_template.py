#!/usr/bin/env python3
"""transformers on the tokenizer a shardft run exported: the chat template applies as in training.

Usage: check_hf_chat_template.py MODEL_DIR TRAIN_JSONL CACHE_H5 END_OF_TURN [N]

MODEL_DIR is an HF directory a run wrote (the end of `shardft train`, or `shardft consolidate`).
AutoTokenizer loads it; for the first N (default 8) conversations of TRAIN_JSONL ({"conversations":
[{"from": "human" | "gpt" | "system", "value": ...}]}), apply_chat_template(tokenize=True) must give
exactly the ids shardft trained on, read from the run's tokenized-set cache CACHE_H5 (datasets
offsets and input_ids, sample i = record i), and the generation prompt of the conversation without its
last turn must be a prefix of them. GenerationConfig must stop at END_OF_TURN. Prints one JSON line.
"""

import json
import sys

import h5py
from transformers import AutoTokenizer, GenerationConfig

ROLES = {"human": "user", "gpt": "assistant", "system": "system", "user": "user", "assistant": "assistant"}


def main():
    model_dir, data, cache, end_of_turn = sys.argv[1:5]
    n = int(sys.argv[5]) if len(sys.argv) > 5 else 8
    tok = AutoTokenizer.from_pretrained(model_dir)
    with h5py.File(cache, "r") as f:
        offsets = f["offsets"][:]
        ids = f["input_ids"][:]
    with open(data, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()][:n]
    for i, record in enumerate(records):
        messages = [{"role": ROLES[t["from"]], "content": t["value"]} for t in record["conversations"]]
        theirs = tok.apply_chat_template(messages, tokenize=True)
        ours = ids[offsets[i]:offsets[i + 1]].tolist()
        assert theirs == ours, f"conversation {i}: transformers {theirs}\n shardft {ours}"
        prompt = tok.apply_chat_template(messages[:-1], tokenize=True, add_generation_prompt=True)
        assert ours[: len(prompt)] == prompt, f"conversation {i}: generation prompt {prompt} is not a prefix of {ours}"
    gen = GenerationConfig.from_pretrained(model_dir)
    eos = gen.eos_token_id if isinstance(gen.eos_token_id, list) else [gen.eos_token_id]
    stop = tok.convert_tokens_to_ids(end_of_turn)
    assert stop in eos, f"generation_config.json eos_token_id {eos} lacks {end_of_turn} ({stop})"
    print(json.dumps({"conversations": len(records), "tokenizer": type(tok).__name__, "eos_token_id": eos}))


if __name__ == "__main__":
    main()
