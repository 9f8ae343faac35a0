#!/usr/bin/env python3
"""PyTorch's side of jobs/gpu/validate.sh's benchmark: the training step of the shape shardft ran.

transformers' LlamaForCausalLM built from a config (no download), SDPA attention, fp32 master weights
with bf16 autocast (shardft's bf16: fp32 master, bf16 compute), fused AdamW, gradient clipping at 1.0,
batch x seq random tokens (every position a target). Prints one JSON object: median step time over
the timed steps, tokens/s, MFU under shardft's FLOP count (train/mfu.cpp: 6 x matmul weights + 12 L d T
attention) against --peak-tflops, and the allocator's peak memory over
the whole run.

With lora_r=R (> 0) the step is trl's LoRA fine-tuning instead: the base loaded in bf16 and frozen, LoRA
(r R, alpha 2R, lora_dropout, every linear layer of the decoder: PEFT's all-linear) through PEFT where it
is importable, else through the LoRA layer below (PEFT's math: y = base(x) + B(A(dropout(x))) * alpha / r,
B zero at start); the adapters fp32 under bf16 autocast, AdamW over them alone.

  torch_bench.py [--device cuda|cpu] [--peak-tflops 989] name=llama-1b hidden=2048 layers=16 heads=32
                 kv_heads=8 inter=8192 vocab=128256 seq=2048 batch=2 steps=10 warmup=2 rope_theta=500000
                 [lora_r=16 lora_dropout=0.05]
"""
import argparse
import inspect
import json
import statistics
import sys
import time


def flops_per_token(s):
    """shardft's count (train/mfu.cpp training_flops_per_token): 6 x matmul weights + 12 L d T attention."""
    d, h, g, layers, t = s["hidden"], s["heads"], s["kv_heads"], s["layers"], s["seq"]
    hd = d // h
    p_gemm = layers * (2 * d * h * hd + 2 * d * g * hd + 3 * d * s["inter"]) + s["vocab"] * d
    return 6.0 * p_gemm + 12.0 * layers * d * t


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def add_lora(model, r, dropout):
    """Freezes the model and adds LoRA on every decoder linear layer: PEFT's, or this file's own layer.
    Returns a description of which."""
    import torch
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        from peft import LoraConfig, get_peft_model
        cfg = LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=dropout, target_modules=list(LORA_TARGETS),
                         bias="none", task_type="CAUSAL_LM")
        import peft
        return get_peft_model(model, cfg), f"peft {peft.__version__}"
    except ImportError:
        pass

    class LoraLinear(torch.nn.Module):
        def __init__(self, base):
            super().__init__()
            self.base = base
            self.a = torch.nn.Linear(base.in_features, r, bias=False, dtype=torch.float32, device=base.weight.device)
            self.b = torch.nn.Linear(r, base.out_features, bias=False, dtype=torch.float32, device=base.weight.device)
            torch.nn.init.kaiming_uniform_(self.a.weight, a=5 ** 0.5)
            torch.nn.init.zeros_(self.b.weight)
            self.drop = torch.nn.Dropout(dropout)
            self.scale = 2.0

        def forward(self, x):
            return self.base(x) + self.b(self.a(self.drop(x))) * self.scale

    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name in LORA_TARGETS:
                if hasattr(parent, name):
                    setattr(parent, name, LoraLinear(getattr(parent, name)))
    return model, "this script's LoRA layer (PEFT not importable)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("shape", nargs="+", help="KEY=VALUE: name hidden layers heads kv_heads inter vocab seq batch steps warmup rope_theta")
    args = ap.parse_args()
    s = {}
    for item in args.shape:
        k, _, v = item.partition("=")
        s[k] = v if k == "name" else (float(v) if k in ("rope_theta", "lora_dropout") else int(v))
    lora_r = s.get("lora_r", 0)

    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    dev = torch.device(args.device)
    torch.manual_seed(0)
    # transformers 5 moved rope_theta into rope_parameters; 4.x takes it directly.
    if "rope_parameters" in inspect.signature(LlamaConfig.__init__).parameters:
        rope = {"rope_parameters": {"rope_type": "default", "rope_theta": s["rope_theta"]}}
    else:
        rope = {"rope_theta": s["rope_theta"]}
    def build(attn):
        cfg = LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["inter"],
                          num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                          num_key_value_heads=s["kv_heads"], max_position_embeddings=s["seq"],
                          rms_norm_eps=1e-5, tie_word_embeddings=True, attn_implementation=attn, **rope)
        return LlamaForCausalLM(cfg)

    # SDPA needs torch >= 2.1.1; an older torch (Debian's 1.13, CPU) runs eager, and the output says so.
    fallback = None
    try:
        model = build("sdpa")
    except (ImportError, ValueError) as e:
        fallback = f"sdpa unavailable ({e}); eager attention"
        model = build("eager")
    lora_impl = None
    if lora_r > 0:  # trl's LoRA setup: the base in bf16, frozen; the adapters fp32
        model, lora_impl = add_lora(model.to(device=dev, dtype=torch.bfloat16), lora_r, s.get("lora_dropout", 0.05))
        for p in model.parameters():
            if p.requires_grad:
                p.data = p.data.float()
        model = model.train()
    else:
        model = model.to(device=dev, dtype=torch.float32).train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    attn = getattr(model.config, "_attn_implementation", None)
    adamw = dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    if args.device == "cuda":
        adamw["fused"] = True  # one kernel for the whole update, as shardft's adamw
    opt = torch.optim.AdamW(trainable, **adamw)
    ids = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), device=dev)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=args.device, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        return loss

    for _ in range(s["warmup"]):
        step()
    sync()
    times, losses = [], []
    for _ in range(s["steps"]):
        t0 = time.perf_counter()
        loss = step()
        sync()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    sec = statistics.median(times)
    tps = s["batch"] * s["seq"] / sec
    out = {
        "framework": f"pytorch {torch.__version__}, transformers {transformers.__version__} LlamaForCausalLM",
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "attn_implementation": attn, "attn_fallback": fallback,
        "precision": ("bf16 frozen base, fp32 LoRA adapters, bf16 autocast" if lora_r > 0 else "fp32 weights, bf16 autocast"),
        "optimizer": "AdamW fused" if args.device == "cuda" else "AdamW", "lora": lora_impl,
        "shape": s, "parameters": sum(p.numel() for p in model.parameters()),
        "trainable_parameters": sum(p.numel() for p in trainable),
        "step_ms": sec * 1e3, "tokens_per_second": tps,
        "mfu": flops_per_token(s) * tps / (args.peak_tflops * 1e12) if args.peak_tflops > 0 else None,
        "peak_tflops": args.peak_tflops,
        "all_step_ms": [t * 1e3 for t in times], "loss_first_last": [losses[0], losses[-1]],
    }
    if args.device == "cuda":
        out["max_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        out["max_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
