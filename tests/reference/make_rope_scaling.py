#!/usr/bin/env python3
"""RoPE scaling ground truth from transformers itself (rope_scaling in config.json).

Writes, next to this script:
  rope_scaling.json             for each case: the config, the positions of one forward call, and what
                                LlamaRotaryEmbedding(config) gives for them: its inv_freq buffer after the
                                call, its attention_scaling, and cos / sin (first head_dim/2 columns; the
                                second half repeats them); plus the batch and loss of the model below
  hf/tiny_llama_rope_llama3/    a tiny LlamaForCausalLM with llama3 rope_scaling (F32), whose loss on a
                                fixed batch rope_scaling.json records (and how far plain RoPE is from it,
                                so that a test of it cannot pass without the scaling)

Run with the venv of jobs/install-test-deps.sh (transformers 4.46):
  .cache/hfvenv/bin/python tests/reference/make_rope_scaling.py
Deterministic: a rerun rewrites the same files.
"""

import copy
import json
import os
import shutil

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "tiny_llama_rope_llama3"
IGNORE = -100

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)


def case(name, hidden_size, heads, theta, max_pos, rope_scaling, positions):
    return dict(name=name, config=dict(hidden_size=hidden_size, num_attention_heads=heads, rope_theta=theta,
                                       max_position_embeddings=max_pos, rope_scaling=rope_scaling),
                positions=positions)


CASES = [
    # head_dim 16: wavelengths 6.3, 32, 167, 861, ... against original 64: one kept, one smoothed, the
    # rest divided by the factor.
    case("llama3", 64, 4, 500000.0, 1024,
         {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}, [0, 1, 2, 5, 17, 63, 64, 100, 300]),
    # Llama 3.1's own numbers at its head_dim.
    case("llama3_3.1", 4096, 32, 500000.0, 131072,
         {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}, [0, 1, 3, 10, 100, 1000]),
    # The older "type" key.
    case("linear", 64, 4, 10000.0, 256, {"type": "linear", "factor": 4.0}, [0, 1, 2, 7, 31, 200]),
    # Within max_position_embeddings (64): plain inv_freq.
    case("dynamic_within", 64, 4, 10000.0, 64, {"rope_type": "dynamic", "factor": 2.0}, [0, 1, 5, 20, 63]),
    # Beyond it: the base is NTK-rescaled for the call's length max(position) + 1 = 151.
    case("dynamic_beyond", 64, 4, 10000.0, 64, {"rope_type": "dynamic", "factor": 2.0}, [0, 1, 5, 63, 64, 150]),
    case("yarn", 64, 4, 10000.0, 64, {"rope_type": "yarn", "factor": 4.0}, [0, 1, 2, 9, 40, 63, 200]),
    case("yarn_options", 64, 4, 1000000.0, 128,
         {"type": "yarn", "factor": 8.0, "beta_fast": 16.0, "beta_slow": 2.0, "attention_factor": 1.25},
         [0, 1, 3, 50, 127, 400]),
]


def rotary(c):
    cfg = LlamaConfig(vocab_size=32, intermediate_size=32, num_hidden_layers=1, num_key_value_heads=c["config"]["num_attention_heads"],
                      **copy.deepcopy(c["config"]))
    rot = LlamaRotaryEmbedding(config=cfg)
    pos = torch.tensor([c["positions"]], dtype=torch.long)
    x = torch.zeros(1, dtype=torch.float32)
    cos, sin = rot(x, pos)
    half = cfg.hidden_size // cfg.num_attention_heads // 2
    assert torch.equal(cos[0, :, :half], cos[0, :, half:]) and torch.equal(sin[0, :, :half], sin[0, :, half:])
    return dict(c, seq_len=max(c["positions"]) + 1, inv_freq=rot.inv_freq.double().tolist(),
                attention_scaling=float(rot.attention_scaling), cos=cos[0, :, :half].double().tolist(),
                sin=sin[0, :, :half].double().tolist())


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            p.copy_(1.0 + 0.1 * noise if name.endswith("norm.weight") else 0.1 * noise)


def tiny_model():
    """head_dim 8, theta 10000: wavelengths 6.3, 63, 628, 6283 against original 64 (low 1, high 4): one
    kept, one smoothed, two divided by 8. A 2 x 48 batch, so that positions reach past the smoothing."""
    out_dir = os.path.join(HERE, "hf", MODEL)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    gen = torch.Generator().manual_seed(16)
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 64}
    kwargs = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=1024, rope_theta=10000.0, rms_norm_eps=1e-5,
                  tie_word_embeddings=True, bos_token_id=None, eos_token_id=None)
    model = LlamaForCausalLM(LlamaConfig(rope_scaling=scaling, **kwargs)).eval()
    randomize(model, gen)
    model.save_pretrained(out_dir, safe_serialization=True)
    gen_cfg = os.path.join(out_dir, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)

    batch, seq = 2, 48
    ids = torch.randint(0, 96, (batch, seq), generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.long)
    labels = ids.clone()
    labels[0, :5] = IGNORE
    reloaded = LlamaForCausalLM.from_pretrained(out_dir, torch_dtype=torch.float32).eval()
    assert reloaded.config.rope_scaling == scaling
    with torch.no_grad():
        loss = reloaded(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
        loss64 = reloaded.double()(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
        plain = LlamaForCausalLM(LlamaConfig(rope_scaling=None, **kwargs)).eval()
        plain.load_state_dict(reloaded.float().state_dict())
        loss_plain = plain(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
    assert abs(loss - loss64) <= 1e-5 * abs(loss64), (loss, loss64)
    assert abs(loss - loss_plain) > 1e-3 * abs(loss), (loss, loss_plain)
    return {"input_ids": ids.tolist(), "attention_mask": mask.tolist(), "labels": labels.tolist(), "loss": loss,
            "loss_float64": loss64, "loss_plain_rope": loss_plain}


def main():
    out = {"generator": "tests/reference/make_rope_scaling.py", "transformers": transformers.__version__,
           "cases": [rotary(c) for c in CASES], MODEL: tiny_model()}
    with open(os.path.join(HERE, "rope_scaling.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    for c in out["cases"]:
        print(f"{c['name']}: attention_scaling {c['attention_scaling']:.6f}, inv_freq {c['inv_freq'][:4]}")
    m = out[MODEL]
    print(f"{MODEL}: loss {m['loss']:.6f} (plain RoPE {m['loss_plain_rope']:.6f})")


if __name__ == "__main__":
    main()
