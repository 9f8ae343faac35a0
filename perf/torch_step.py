#!/usr/bin/env python3
"""One training step of PyTorch on the model and batch shardft's train_step benchmarks use.

The reference side of perf/side_by_side.sh and perf/cpu_vs_torch.sh: transformers' LlamaForCausalLM in
fp32, torch.optim.AdamW, clip_grad_norm_(1.0), on one process with --threads intra-op threads (shardft
runs one rank per core with one BLAS thread). --attn picks transformers' attention (eager, the default,
or sdpa: torch's scaled_dot_product_attention); --compile wraps the model in torch.compile (PyTorch 2;
its compilation runs in the warm-up steps, which --warmup must cover); --bf16 runs the forward under
torch.autocast(bf16) on the CPU, as trl's bf16=True does (bf16 matmuls, which oneDNN runs on AMX where the
CPU has it; fp32 weights, gradients and AdamW). The shapes:
  default  hidden 128, intermediate 384, 4 / 2 heads, 2 layers, vocab 272 (tied), 16 sequences x 24
           (perf/bench_step.cpp's)
  wide     hidden 512, intermediate 1536, 8 / 4 heads, 2 layers, vocab 272 (tied), 1 sequence x 512
           (perf/bench_step.cpp's)
  S        hidden 256, intermediate 768, 8 / 4 heads, 4 layers, vocab 272 (tied), 4 sequences x 256
           (3.2 M parameters; perf/cpu_vs_torch.sh's, through shardft's CLI)
  M        hidden 512, intermediate 1536, 8 / 8 heads, 6 layers, vocab 272 (tied), 2 sequences x 512
           (20.6 M parameters; likewise)
Token values do not change the work; they are uniform random bytes (every position a target).

Prints one JSON object: the configuration, ms per step (median over --steps timed steps after
--warmup untimed ones) and the tokens / FLOPs per second under shardft's FLOP count.
"""
import argparse
import json
import statistics
import sys
import time

SHAPES = {
    "default": dict(hidden=128, inter=384, heads=4, kv_heads=2, layers=2, vocab=272, batch=16, seq=24),
    "wide": dict(hidden=512, inter=1536, heads=8, kv_heads=4, layers=2, vocab=272, batch=1, seq=512),
    "S": dict(hidden=256, inter=768, heads=8, kv_heads=4, layers=4, vocab=272, batch=4, seq=256),
    "M": dict(hidden=512, inter=1536, heads=8, kv_heads=8, layers=6, vocab=272, batch=2, seq=512),
}


def step_flops(s):
    """shardft's count (perf/bench_step.cpp): 6 x GEMM weights x tokens + causal attention."""
    d, hd, i, v = s["hidden"], s["hidden"] // s["heads"], s["inter"], s["vocab"]
    h, g, layers, b, t = s["heads"], s["kv_heads"], s["layers"], s["batch"], s["seq"]
    p_gemm = layers * (2 * d * h * hd + 2 * d * g * hd + 3 * d * i) + v * d
    return 6.0 * p_gemm * b * t + layers * b * h * 3.0 * 2.0 * hd * t * (t + 1.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="wide")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--attn", choices=("eager", "sdpa"), default="eager")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch 2)")
    ap.add_argument("--bf16", action="store_true", help="the forward under torch.autocast(cpu, bf16)")
    args = ap.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    s = SHAPES[args.shape]
    cfg = LlamaConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["inter"],
                      num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                      num_key_value_heads=s["kv_heads"], max_position_embeddings=max(512, s["seq"]),
                      rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=True,
                      attn_implementation=args.attn)
    model = LlamaForCausalLM(cfg).float().train()
    forward = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    ids = torch.randint(0, s["vocab"], (s["batch"], s["seq"]))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            out = forward(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return out.loss.item()

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    tokens = s["batch"] * s["seq"]
    mode = "torch.compile" if args.compile else "eager"
    json.dump({"framework": f"pytorch {torch.__version__} {mode}, {args.attn} attention, transformers LlamaForCausalLM",
               "mode": mode, "attn": args.attn, "dtype": "bf16" if args.bf16 else "fp32",
               "shape": args.shape, **s, "threads": args.threads, "steps": args.steps,
               "ms_per_step": sec * 1e3, "tokens_per_second": tokens / sec,
               "GFLOPS": step_flops(s) / sec / 1e9, "all_ms": [t * 1e3 for t in times]}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
