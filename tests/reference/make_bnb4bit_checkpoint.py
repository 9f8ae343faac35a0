#!/usr/bin/env python3
"""tiny_llama saved as transformers saves a bitsandbytes 4-bit model: tests/reference/hf/tiny_llama_bnb4.

What it stands for: AutoModelForCausalLM.from_pretrained("tiny_llama", torch_dtype=torch.bfloat16,
    quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                           bnb_4bit_use_double_quant=True))
followed by save_pretrained(). transformers turns every decoder nn.Linear into bnb.nn.Linear4bit (never
lm_head), whose Params4bit quantizes with bnb.functional.quantize_4bit(w, blocksize=64,
compress_statistics=True, quant_type="nf4", quant_storage=torch.uint8); Linear4bit._save_to_state_dict
writes the packed weight ([ceil(n/2), 1] uint8) under X.weight and QuantState.as_dict(packed=True) under
X.weight.<key>: absmax (uint8), quant_map (fp32[16]), nested_absmax (fp32), nested_quant_map (fp32[256])
and quant_state.bitsandbytes__nf4 (the JSON of the non-tensor items as uint8 bytes). Every other tensor
keeps the load dtype (bf16 here). config.json gains BitsAndBytesConfig.to_dict() as transformers 4.46
writes it. The same calls are made here directly, with bitsandbytes' own functions, so the fixture needs
no GPU and no transformers (the venv that has bitsandbytes has no transformers):
    /work/bnbvenv/bin/pip install bitsandbytes safetensors
    /work/bnbvenv/bin/python tests/reference/make_bnb4bit_checkpoint.py

shardft quantizes by the rules of bitsandbytes' CUDA kernels, and this runs its CPU backend. The two
differ only on exact ties, all-zero blocks and near-midpoint absmax (make_nf4_fixture.py lists the
cases). The script re-derives every stored byte with make_nf4_fixture's transliteration of the CUDA
kernels and asserts they are equal, and that torch's fp32 mean (the stored offset) equals the mean
summed in double and rounded once (what shardft computes): for this model neither case occurs, so
shardft's own quantizer must give these bytes exactly (tests/unit/test_bnb4_checkpoint.cpp).
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import bitsandbytes
import bitsandbytes.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_nf4_fixture import cuda_rules_blockwise, cuda_rules_nf4  # noqa: E402

HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf")
SRC = os.path.join(HF, "tiny_llama")
OUT = os.path.join(HF, "tiny_llama_bnb4")
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

# BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True).to_dict()
# in transformers 4.46.3 (its __dict__ in order, dtypes as names, then the two properties).
QUANTIZATION_CONFIG = {
    "_load_in_4bit": True,
    "_load_in_8bit": False,
    "bnb_4bit_compute_dtype": "float32",
    "bnb_4bit_quant_storage": "uint8",
    "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": True,
    "llm_int8_enable_fp32_cpu_offload": False,
    "llm_int8_has_fp16_weight": False,
    "llm_int8_skip_modules": None,
    "llm_int8_threshold": 6.0,
    "load_in_4bit": True,
    "load_in_8bit": False,
    "quant_method": "bitsandbytes",
}


def read_tiny_llama():
    with open(os.path.join(SRC, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for name, file in weight_map.items():
        with safe_open(os.path.join(SRC, file), framework="pt") as f:
            tensors[name] = f.get_tensor(name)
    return tensors


def check_like_cuda(name, w, packed, state, code2):
    """The bytes bitsandbytes' CPU backend gave equal what its CUDA kernels (and shardft) give."""
    x = w.float().numpy().reshape(-1)
    ref_packed, ref_absmax = cuda_rules_nf4(x)
    assert (packed.numpy().reshape(-1) == ref_packed).all(), f"{name}: packed nibbles differ from the CUDA rules"
    offset = np.float32(state.offset.item())
    double_mean = np.float32(np.float64(ref_absmax).mean())
    assert offset == double_mean, f"{name}: torch's fp32 mean {offset!r} is not the double mean {double_mean!r}"
    ref_q, ref_absmax2 = cuda_rules_blockwise((ref_absmax - offset).astype(np.float32), code2)
    assert (state.absmax.numpy() == ref_q).all(), f"{name}: 8-bit absmax differs from the CUDA rules"
    assert (state.state2.absmax.numpy() == ref_absmax2).all(), f"{name}: nested absmax differs"


def main():
    torch.set_num_threads(1)
    code2 = F.create_dynamic_map(signed=True).numpy().astype(np.float32)
    out = {}
    quantized = 0
    for name, w in sorted(read_tiny_llama().items()):
        module = name.split(".")[-2] if name.endswith(".weight") else ""
        if module not in LINEARS:
            out[name] = w.contiguous()
            continue
        packed, state = F.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type="nf4",
                                        quant_storage=torch.uint8)
        assert packed.dtype == torch.uint8 and tuple(packed.shape) == ((w.numel() + 1) // 2, 1), packed.shape
        check_like_cuda(name, w, packed, state, code2)
        out[name] = packed.contiguous()
        for key, v in state.as_dict(packed=True).items():
            out[f"{name}.{key}"] = v.contiguous()
        quantized += 1
    assert quantized == 14, quantized

    os.makedirs(OUT, exist_ok=True)
    save_file(out, os.path.join(OUT, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(SRC, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = QUANTIZATION_CONFIG
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    for tok in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(SRC, tok)):
            shutil.copy(os.path.join(SRC, tok), os.path.join(OUT, tok))
    print(f"wrote {OUT}: {quantized} NF4 linears, {len(out)} tensors "
          f"(bitsandbytes {bitsandbytes.__version__}, torch {torch.__version__})", file=sys.stderr)


if __name__ == "__main__":
    main()
