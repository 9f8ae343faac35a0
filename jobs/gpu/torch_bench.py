#!/usr/bin/env python3
"""PyTorch's side of jobs/gpu/validate.sh's benchmark: the training step of the shape shardft ran.

transformers' LlamaForCausalLM built from a config (no download), SDPA attention, fp32 master weights
with bf16 autocast (shardft's bf16: fp32 master, bf16 compute), fused AdamW, gradient clipping at 1.0,
batch x seq random tokens (every position a target). Prints one JSON object: median step time over
the timed steps, tokens/s, MFU under shardft's FLOP count (train/mfu.cpp: 6 x matmul weights + 12 L d T
attention) against --peak-tflops, and the allocator's peak memory over
the whole run.

  torch_bench.py [--device cuda|cpu] [--peak-tflops 989] name=llama-1b hidden=2048 layers=16 heads=32
                 kv_heads=8 inter=8192 vocab=128256 seq=2048 batch=2 steps=10 warmup=2 rope_theta=500000
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("shape", nargs="+", help="KEY=VALUE: name hidden layers heads kv_heads inter vocab seq batch steps warmup rope_theta")
    args = ap.parse_args()
    s = {}
    for item in args.shape:
        k, _, v = item.partition("=")
        s[k] = v if k == "name" else (float(v) if k == "rope_theta" else int(v))

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
    model = model.to(device=dev, dtype=torch.float32).train()
    attn = getattr(model.config, "_attn_implementation", None)
    adamw = dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    if args.device == "cuda":
        adamw["fused"] = True  # one kernel for the whole update, as shardft's adamw
    opt = torch.optim.AdamW(model.parameters(), **adamw)
    ids = torch.randint(0, s["vocab"], (s["batch"], s["seq"]), device=dev)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=args.device, dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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
        "attn_implementation": attn, "attn_fallback": fallback, "precision": "fp32 weights, bf16 autocast", "optimizer": "AdamW fused" if args.device == "cuda" else "AdamW",
        "shape": s, "parameters": sum(p.numel() for p in model.parameters()),
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
