#!/usr/bin/env bash
# LoRA against full fine-tuning, memory and traffic per rank: `shardft train` three times at ZeRO-3 on 2
# ranks (jobs/mpirun.sh), a ~110M-parameter Llama shape (hidden 768, 12 layers, 12 heads, MLP 2048, vocab
# 32000, tied embeddings; random weights: the numbers do not depend on their values), a few steps of the
# bundled SFT data: once full fine-tuning from the seed, whose saved model is then the pretrained base
# (model_name_or_path) of LoRA r=16 on all linear layers (frozen base) and of QLoRA (the same LoRA over the
# base's decoder linears held as NF4, load_in_4bit), as users fine-tune. Per run, from the
# end-of-run log line and metrics.jsonl: the model state the engine holds on rank 0 (MemoryReport:
# weights, the frozen part of them, gradients, optimizer state), the measured peak RSS of rank 0, the
# bytes rank 0 sent per step (the ledger's comm_bytes, mean over the steps), and the wall time outside the
# steps (start-up with the model's load, and the final save). QLoRA's NF4 bytes per decoder linear value
# are its frozen weights less LoRA's frozen non-linear part, over rank 0's share of those values.
#
#   perf/lora_memory.sh                 # writes perf/results/lora_memory.json and prints a table
#
# Environment: SHARDFT_BIN (default build/shardft), STEPS (default 3), LORA_R (default 16), SHARDFT_ARGS
# (more train flags for both runs, e.g. "--bf16 true"), RESULT (default perf/results/lora_memory.json).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SHARDFT_BIN=${SHARDFT_BIN:-$root/build/shardft}
steps=${STEPS:-3}; r=${LORA_R:-16}; read -r -a extra <<< "${SHARDFT_ARGS:-}"
results=$root/perf/results
mkdir -p "$results"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
cd "$root"
model=(--vocab_size 32000 --hidden_size 768 --num_hidden_layers 12 --num_attention_heads 12 --num_key_value_heads 12
       --intermediate_size 2048 --tie_word_embeddings true --max_position_embeddings 512)
common=(train --dataset_path jobs/data/sft_train.jsonl --zero_stage 3 --max_steps "$steps" --logging_steps 1
        --per_device_train_batch_size 1 --max_seq_length 64 --do_eval false --save_strategy no
        --max_memory_per_rank none ${extra[@]+"${extra[@]}"})
lora=(--model_name_or_path "$tmp/full" --tokenizer_name_or_path byte --use_peft true --lora_r "$r"
      --lora_alpha $((2 * r)) --lora_dropout 0 --lora_target_modules all-linear)
run() {  # NAME FLAGS...: one run; its start and end times into $tmp/NAME.wall
  local name=$1 t0; shift
  t0=$(date +%s.%N)
  bash jobs/mpirun.sh -np 2 -- "${common[@]}" "$@" --output_dir "$tmp/$name" > "$tmp/$name.log" 2>&1 \
    || { tail -30 "$tmp/$name.log"; exit 1; }
  echo "$t0 $(date +%s.%N)" > "$tmp/$name.wall"
}
run full "${model[@]}"
run lora "${lora[@]}"
run qlora "${lora[@]}" --load_in_4bit true
python3 - "$tmp" "${RESULT:-$results/lora_memory.json}" "$r" "${SHARDFT_ARGS:-}" <<'PY'
import json, re, sys
tmp, out, r, extra = sys.argv[1:5]
rows = {}
for name in ("full", "lora", "qlora"):
    log = open(f"{tmp}/{name}.log").read()
    m = re.search(r"peak memory per rank: (\d+) B measured \(process RSS\); model state (\d+) B \(weights (\d+) B "
                  r"of which frozen (\d+) B, gradients (\d+) B, optimizer (\d+) B\) \+ transient gathers (\d+) B", log)
    assert m, f"{name}: no 'peak memory per rank' line with the model state's parts"
    steps = [l for l in map(json.loads, open(f"{tmp}/{name}/metrics.jsonl")) if "step" in l]
    t0, t1 = map(float, open(f"{tmp}/{name}.wall").read().split())
    wall = t1 - t0
    rows[name] = dict(zip(("peak_rss", "model_state", "weights", "frozen_weights", "grads", "optimizer",
                           "peak_gathered"), map(int, m.groups())),
                      comm_bytes_per_step=sum(s["comm_bytes"] for s in steps) / len(steps),
                      wall_seconds=wall, seconds_outside_steps=wall - sum(s.get("step_seconds", 0) for s in steps),
                      seconds_per_step=sum(s["step_seconds"] for s in steps[1:]) / max(1, len(steps) - 1)
                      if "step_seconds" in steps[0] else None)
# Decoder linears of the shape above: q, k, v, o (768 x 768 each) and gate, up, down (768 x 2048) per layer.
linear_values = 12 * (4 * 768 * 768 + 3 * 768 * 2048)
compute_bytes = 2 if re.search(r"--(bf16|fp16)(\s+true)?(\s|$)", extra) else 4
frozen_other = rows["lora"]["frozen_weights"] - compute_bytes * linear_values / 2
nf4_bytes_per_value = (rows["qlora"]["frozen_weights"] - frozen_other) / (linear_values / 2)
json.dump({"model": "llama h768 L12 I2048 vocab32000 tied (~110M)", "ranks": 2, "zero_stage": 3,
           "lora_r": int(r), "extra_args": extra, "rows": rows,
           "qlora_nf4_bytes_per_linear_value": nf4_bytes_per_value}, open(out, "w"), indent=1)
MiB = 2.0**20
print(f"{'per rank (rank 0)':<28}{'full':>14}{'LoRA r=' + r:>14}{'QLoRA':>14}{'LoRA/full':>11}{'QLoRA/full':>11}")
for key, label in (("weights", "weights (compute)"), ("frozen_weights", "  of which frozen"), ("grads", "gradients"),
                   ("optimizer", "optimizer (master + Adam)"), ("model_state", "model state total"),
                   ("peak_gathered", "stage-3 gathers (peak)"), ("peak_rss", "peak RSS measured"),
                   ("comm_bytes_per_step", "bytes sent per step")):
    a, b, q = rows["full"][key], rows["lora"][key], rows["qlora"][key]
    ratios = "".join(f"{x / a:>11.3f}" if a else f"{'-':>11}" for x in (b, q))
    print(f"{label:<28}{a / MiB:>12.1f}Mi{b / MiB:>12.1f}Mi{q / MiB:>12.1f}Mi{ratios}")
print(f"{'seconds outside the steps':<28}" + "".join(f"{rows[n]['seconds_outside_steps']:>13.1f}s" for n in rows))
print(f"QLoRA: {nf4_bytes_per_value:.4f} bytes per decoder-linear value held (NF4 4 bits + absmax + scales)")
print(f"wrote {out}")
PY
