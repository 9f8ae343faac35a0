#!/usr/bin/env python3
"""perf/cpu_vs_torch.sh's helper: the recipe of a shape, and the report of the rounds.

  cpu_vs_torch.py recipe SHAPE DIR STEPS [DTYPE]  DIR/recipe.yaml and DIR/data.jsonl for shardft's CLI
  cpu_vs_torch.py report WORK OUT WARMUP CASE...   medians of the rounds in WORK, written to OUT (JSON)

The shapes are perf/torch_step.py's, so both frameworks train the same model on rows of the same length.
DTYPE is fp32 (the default) or bf16 (the recipe's bf16: true; torch_step.py --bf16). A CASE is SHAPE-DTYPE,
the name of its folder in WORK.
"""
import json
import os
import platform
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.join(here, "..", "jobs", "gpu")]
from torch_step import SHAPES, step_flops  # noqa: E402  (torch itself is imported only by its main)
from validate_util import write_text_rows  # noqa: E402  (the GPU benchmark's rows, the same way)


def write_recipe(shape, d, steps, dtype="fp32"):
    s = SHAPES[shape]
    os.makedirs(d, exist_ok=True)
    write_text_rows(os.path.join(d, "data.jsonl"), (steps + 1) * s["batch"], s["seq"])
    recipe = {
        "vocab_size": s["vocab"], "hidden_size": s["hidden"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"], "intermediate_size": s["inter"],
        "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": "true",
        "max_position_embeddings": max(512, s["seq"]),
        "dataset_path": os.path.join(d, "data.jsonl"), "dataset_text_field": "text", "max_seq_length": s["seq"],
        "packing": "false", "learning_rate": 3e-4, "lr_scheduler_type": "constant", "warmup_steps": 0,
        "weight_decay": 0.0, "max_grad_norm": 1.0, "per_device_train_batch_size": s["batch"],
        "gradient_accumulation_steps": 1, "max_steps": steps, "logging_steps": 1, "save_strategy": "no",
        "output_dir": os.path.join(d, "run"), "overwrite_output_dir": "true", "seed": 0, "bf16": "true" if dtype == "bf16" else "false",
        "do_eval": "false", "attn_implementation": "auto",
    }
    with open(os.path.join(d, "recipe.yaml"), "w") as f:
        f.write(f"# perf/cpu_vs_torch.sh, shape {shape}\n")
        for k, v in recipe.items():
            f.write(f"{k}: {v}\n")


def shardft_tokens_per_second(metrics, warmup):
    rates = []
    with open(metrics) as f:
        for line in f:
            r = json.loads(line)
            if "tokens_per_second" in r and r.get("step", 0) > warmup:
                rates.append(r["tokens_per_second"])
    if not rates:
        raise SystemExit(f"cpu_vs_torch.py: {metrics} has no logged step after the {warmup} warm-up steps")
    return statistics.median(rates)


def log_line(path, prefix):
    with open(path) as f:
        for line in f:
            if line.startswith(prefix):
                return line[len(prefix):].strip()
    return ""


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def report(work, out, warmup, shapes):
    rows = []
    torch_version = ""
    for case in shapes:
        shape, dtype = case.split("-")
        d = os.path.join(work, case)
        rounds = sorted(int(n[len("metrics-"):-len(".jsonl")]) for n in os.listdir(d) if n.startswith("metrics-"))
        ours = [shardft_tokens_per_second(os.path.join(d, f"metrics-{r}.jsonl"), warmup) for r in rounds]
        torch = {}
        for mode in ("eager", "compile"):
            runs = [json.load(open(os.path.join(d, f"torch-{mode}-{r}.json"))) for r in rounds]
            torch[mode] = [x["tokens_per_second"] for x in runs]
            torch_version = runs[0]["framework"].split()[1]
        s = SHAPES[shape]
        tokens = s["batch"] * s["seq"]
        med = {"shardft": statistics.median(ours), "eager": statistics.median(torch["eager"]),
               "compile": statistics.median(torch["compile"])}
        rows.append({
            "shape": shape, "dtype": dtype, **s, "tokens_per_step": tokens, "rounds": len(rounds),
            "shardft_tokens_per_s": med["shardft"], "torch_sdpa_eager_tokens_per_s": med["eager"],
            "torch_compile_tokens_per_s": med["compile"],
            "shardft_over_eager": med["shardft"] / med["eager"], "shardft_over_compile": med["shardft"] / med["compile"],
            "shardft_gflops": step_flops(s) / tokens * med["shardft"] / 1e9,
            "all_rounds": {"shardft": ours, "eager": torch["eager"], "compile": torch["compile"]},
            "blas": log_line(os.path.join(d, f"shardft-{rounds[0]}.log"), "blas:"),
        })
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        commit = ""
    result = {"cpu": cpu_model(), "cores_online": os.cpu_count(), "commit": commit, "pytorch": torch_version,
              "threads_per_process": 1, "shapes": rows}
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"CPU: {result['cpu']}; BLAS: {rows[0]['blas'] if rows else '-'}; PyTorch {torch_version}; "
          f"medians of {rows[0]['rounds'] if rows else 0} rounds, tokens/s on one core")
    print(f"{'shape':<10} {'shardft':>9} {'torch SDPA eager':>17} {'torch.compile':>14} {'vs eager':>9} {'vs compile':>11}")
    for r in rows:
        print(f"{r['shape'] + ' ' + r['dtype']:<10} {r['shardft_tokens_per_s']:>9.0f} {r['torch_sdpa_eager_tokens_per_s']:>17.0f} "
              f"{r['torch_compile_tokens_per_s']:>14.0f} {r['shardft_over_eager']:>8.2f}x {r['shardft_over_compile']:>10.2f}x")


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "recipe":
        write_recipe(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else "fp32")
    elif len(sys.argv) >= 6 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
