#!/usr/bin/env python3
"""Tiny Hugging Face models of the families beyond make_hf_models.py's, with the loss AND the
gradients transformers computes on a fixed batch, for shardft's loss / gradient parity tests.

Writes, under tests/reference/hf/:
  tiny_qwen3/      Qwen3ForCausalLM: head_dim 16 != hidden 32 / 4 heads, 2 kv heads, q_norm / k_norm,
                   tied embeddings, F32, with the Qwen2-style tokenizer.json (bpe/qwen2_style)
  tiny_llama32/    LlamaForCausalLM as Llama 3.2 is: rope_scaling llama3 (factor 32, low 1, high 4,
                   original 8192, theta 500000, max_position_embeddings 131072: the head's 4 frequencies
                   are kept, blended and scaled),
                   tied embeddings, F32, with the Llama-3-style tokenizer.json
  tiny_qwen2_yarn/ Qwen2ForCausalLM with rope_scaling yarn (factor 4, original context 1024 =
                   max_position_embeddings,
                   theta 10000: the ramp runs over the head's frequencies), tied, F32,
                   with the Qwen2-style tokenizer.json
  tiny_headdim/    MistralForCausalLM as Mistral Nemo is: head_dim 16 != hidden 32 / 4 heads, untied,
                   no sliding window, BF16, with the GPT-2-style tokenizer.json
  batch_grads.json per model: the fixed batch (as make_hf_models.py makes them), transformers' loss in
                   fp32 and fp64, and the gradient of that loss (mean over the target tokens) for every
                   parameter, from the saved files reloaded in fp64: its L2 norm ("norm") and GRAD_SAMPLES
                   of its values ("values": all of them when it has no more, else flat elements
                   i * numel // GRAD_SAMPLES). Tied models list the embedding once (its gradient has both
                   uses).

Qwen3 comes from tests/reference/qwen3_compat.py when the venv's transformers predates it (4.46 on torch
1.13; see that file). Every parameter is randomised as make_hf_models.py does (norm weights, q_norm and
k_norm included, 1 + 0.1 * N(0,1)).

  .cache/hfvenv/bin/python tests/reference/make_hf_head_dim_models.py
"""

import json
import os
import shutil

import torch
from transformers import LlamaConfig, MistralConfig, Qwen2Config

import qwen3_compat
from make_hf_models import HERE, OUT, fixed_batch, randomize, tokenizer_vocab

qwen3_compat.register()
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

GRAD_SAMPLES = 64

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def grad_record(g):
    flat = g.detach().double().flatten()
    n = flat.numel()
    idx = range(n) if n <= GRAD_SAMPLES else [i * n // GRAD_SAMPLES for i in range(GRAD_SAMPLES)]
    return {"numel": n, "norm": float("%.10g" % flat.norm().item()),
            "values": [float("%.9g" % flat[i].item()) for i in idx]}


def make(name, config, tokenizer_dir, seed, dtype):
    out_dir = os.path.join(OUT, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    tok_src = os.path.join(HERE, "bpe", tokenizer_dir, "tokenizer.json")
    gen = torch.Generator().manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config).eval()
    randomize(model, gen)
    model.to(dtype).save_pretrained(out_dir, safe_serialization=True)
    shutil.copy(tok_src, os.path.join(out_dir, "tokenizer.json"))
    gen_cfg = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)

    ids, mask, labels = fixed_batch(config.vocab_size, gen)
    reloaded = AutoModelForCausalLM.from_pretrained(out_dir, torch_dtype=torch.float32).eval()
    assert type(reloaded).__name__ == config.architectures[0], type(reloaded)
    with torch.no_grad():
        loss = reloaded(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
    reloaded = reloaded.double()
    loss64 = reloaded(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss64.backward()
    assert abs(loss - loss64.item()) <= 1e-5 * abs(loss64.item()), (loss, loss64.item())
    grads = {n: grad_record(p.grad) for n, p in reloaded.named_parameters()}
    return {"input_ids": ids.tolist(), "attention_mask": mask.tolist(), "labels": labels.tolist(),
            "loss": loss, "loss_float64": loss64.item(), "grads": grads}


def vocab_of(tokenizer_dir):
    v = tokenizer_vocab(os.path.join(HERE, "bpe", tokenizer_dir, "tokenizer.json"))
    return (v + 63) // 64 * 64


def main():
    common = dict(num_hidden_layers=2, bos_token_id=None, eos_token_id=None)
    models = {}
    models["tiny_qwen3"] = make(
        "tiny_qwen3",
        AutoConfig.for_model("qwen3", vocab_size=vocab_of("qwen2_style"), hidden_size=32, intermediate_size=64,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                             rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False,
                             use_sliding_window=False, architectures=["Qwen3ForCausalLM"], **common),
        "qwen2_style", seed=21, dtype=torch.float32)
    models["tiny_llama32"] = make(
        "tiny_llama32",
        LlamaConfig(vocab_size=vocab_of("llama3_style"), hidden_size=32, intermediate_size=64, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                    tie_word_embeddings=True, attention_bias=False, architectures=["LlamaForCausalLM"], **common),
        "llama3_style", seed=22, dtype=torch.float32)
    models["tiny_qwen2_yarn"] = make(
        "tiny_qwen2_yarn",
        Qwen2Config(vocab_size=vocab_of("qwen2_style"), hidden_size=32, intermediate_size=64, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=1024, rope_theta=10000.0, rms_norm_eps=1e-6,
                    rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
                    tie_word_embeddings=True, use_sliding_window=False, architectures=["Qwen2ForCausalLM"],
                    **common),
        "qwen2_style", seed=23, dtype=torch.float32)
    models["tiny_headdim"] = make(
        "tiny_headdim",
        MistralConfig(vocab_size=vocab_of("gpt2_style"), hidden_size=32, intermediate_size=48, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=16, max_position_embeddings=512, rope_theta=1000000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, sliding_window=None,
                      architectures=["MistralForCausalLM"], **common),
        "gpt2_style", seed=24, dtype=torch.bfloat16)
    with open(os.path.join(OUT, "batch_grads.json"), "w") as f:
        json.dump(models, f, indent=None, separators=(",", ":"))
        f.write("\n")
    for name, m in models.items():
        print(f"{name}: loss {m['loss']:.6f}, {len(m['grads'])} parameters")


if __name__ == "__main__":
    main()
