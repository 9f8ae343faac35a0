#!/usr/bin/env python3
"""Tiny Hugging Face models for shardft's import / export parity tests.

Writes, under tests/reference/hf/:
  tiny_qwen2/   Qwen2ForCausalLM (q/k/v biases, tied embeddings), F32, one model.safetensors,
                with the Qwen2-style tokenizer.json of tests/reference/bpe/qwen2_style/
  tiny_llama/   LlamaForCausalLM (grouped-query attention, untied head), BF16, sharded:
                model.safetensors.index.json + model-0000N-of-0000M.safetensors,
                with the Llama-3-style tokenizer.json of tests/reference/bpe/llama3_style/
  tiny_mistral/ MistralForCausalLM (sliding_window 64, longer than the batch), F16, one file,
                with the GPT-2-style tokenizer.json of tests/reference/bpe/gpt2_style/
  batch.json    one fixed batch per model (input_ids, attention_mask, labels with -100 on the
                prompt and on right padding) and the loss transformers computes for it in fp32
                (model(input_ids, attention_mask=..., labels=...).loss: mean over the tokens whose
                shifted label is not -100), after reloading the saved files with from_pretrained.

Every parameter is drawn at random (matrices 0.1 * N(0,1), norm weights 1 + 0.1 * N(0,1), biases
0.1 * N(0,1)) so that no part of the math hides behind a default zero or one.

Run after tests/reference/make_bpe_tokenizer.py, with transformers and torch available:
  /tmp/hfvenv/bin/python tests/reference/make_hf_models.py
(see tests/reference/README.md for the environment; jobs/install-test-deps.sh builds it).
"""

import json
import os
import shutil

import torch
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "hf")
IGNORE = -100

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def tokenizer_vocab(path):
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * noise)
            else:
                p.copy_(0.1 * noise)


def fixed_batch(vocab, gen, batch=2, seq=16, prompt=5, pad=4):
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.long)
    labels = ids.clone()
    labels[0, :prompt] = IGNORE            # row 0: a prompt without loss, then the answer
    mask[1, seq - pad:] = 0                # row 1: right padding
    ids[1, seq - pad:] = 0
    labels[1, seq - pad:] = IGNORE
    return ids, mask, labels


def make(name, config_cls, model_cls, config_kwargs, tokenizer_dir, seed, dtype, max_shard_size):
    out_dir = os.path.join(OUT, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    tok_src = os.path.join(HERE, "bpe", tokenizer_dir, "tokenizer.json")
    vocab = tokenizer_vocab(tok_src)
    vocab = (vocab + 63) // 64 * 64  # embedding rows rounded up, as real models do
    gen = torch.Generator().manual_seed(seed)
    cfg = config_cls(vocab_size=vocab, **config_kwargs)
    model = model_cls(cfg).eval()
    randomize(model, gen)
    model.to(dtype).save_pretrained(out_dir, safe_serialization=True, max_shard_size=max_shard_size)
    shutil.copy(tok_src, os.path.join(out_dir, "tokenizer.json"))
    # generation_config.json says nothing shardft needs
    gen_cfg = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)

    # The loss on a fixed batch, from the files as saved (BF16 rounding included), in fp32.
    reloaded = model_cls.from_pretrained(out_dir, torch_dtype=torch.float32).eval()
    ids, mask, labels = fixed_batch(vocab, gen)
    with torch.no_grad():
        loss = reloaded(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
        loss64 = reloaded.double()(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
    assert abs(loss - loss64) <= 1e-5 * abs(loss64), (loss, loss64)
    return {"input_ids": ids.tolist(), "attention_mask": mask.tolist(), "labels": labels.tolist(),
            "loss": loss, "loss_float64": loss64}


def main():
    os.makedirs(OUT, exist_ok=True)
    batches = {}
    batches["tiny_qwen2"] = make(
        "tiny_qwen2", Qwen2Config, Qwen2ForCausalLM,
        dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=512, rope_theta=1000000.0, rms_norm_eps=1e-6,
             tie_word_embeddings=True, use_sliding_window=False, bos_token_id=None, eos_token_id=None),
        "qwen2_style", seed=11, dtype=torch.float32, max_shard_size="10GB")
    batches["tiny_llama"] = make(
        "tiny_llama", LlamaConfig, LlamaForCausalLM,
        dict(hidden_size=32, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=1, max_position_embeddings=512, rope_theta=500000.0, rms_norm_eps=1e-5,
             tie_word_embeddings=False, attention_bias=False, bos_token_id=None, eos_token_id=None),
        "llama3_style", seed=12, dtype=torch.bfloat16, max_shard_size="60KB")
    batches["tiny_mistral"] = make(
        "tiny_mistral", MistralConfig, MistralForCausalLM,
        dict(hidden_size=16, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=512, rope_theta=10000.0, rms_norm_eps=1e-5,
             tie_word_embeddings=False, sliding_window=64, bos_token_id=None, eos_token_id=None),
        "gpt2_style", seed=13, dtype=torch.float16, max_shard_size="10GB")
    with open(os.path.join(OUT, "batch.json"), "w") as f:
        json.dump(batches, f, indent=1)
        f.write("\n")
    for name, b in batches.items():
        print(f"{name}: loss {b['loss']:.6f}")


if __name__ == "__main__":
    main()
