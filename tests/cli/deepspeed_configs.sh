#!/usr/bin/env bash
# `--deepspeed ds_config.json` with the example configs at 2 ranks: jobs/recipes/ds_zero2_auto.json (stage 2,
# "auto" batch sizes, optimizer params and WarmupDecayLR scheduler resolved from the recipe and flags) and
# ds_zero3_zeropp.json (stage 3 with ZeRO++ keys) train, and the startup report shows each key's resolved value
# or what shardft does instead; a WarmupCosineLR block trains at DeepSpeed's rates (metrics.jsonl against
# tests/reference/make_deepspeed_lr.py); configs with keys shardft does not implement fail before training,
# naming the file and the key.
# Usage: deepspeed_configs.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
run() { timeout 180 mpirun -np 2 --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" "$@"; }
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect LOG TEXT: the log has TEXT (fixed string)
  grep -qF -- "$2" "$1" || { cat "$1"; fail "$(basename "$1") lacks: $2"; }
}
common=(train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 3 --do_eval false)

# Stage 2, everything "auto": the recipe (default.yaml) and flags decide, DeepSpeed's global batch is computed.
run "${common[@]}" --deepspeed jobs/recipes/ds_zero2_auto.json --per_device_train_batch_size 4 \
  --gradient_accumulation_steps 2 --weight_decay 0.01 --output_dir "$tmp/z2" > "$tmp/z2.log" 2>&1 \
  || { cat "$tmp/z2.log"; fail "stage-2 run with ds_zero2_auto.json failed"; }
log=$tmp/z2.log
expect "$log" "DeepSpeed config jobs/recipes/ds_zero2_auto.json: 25 keys map to recipe keys, 7 are accepted"
expect "$log" "  zero_optimization.stage = 2 -> zero_stage = 2"
expect "$log" "  train_micro_batch_size_per_gpu = auto -> per_device_train_batch_size = 4 (auto: --per_device_train_batch_size)"
expect "$log" "  gradient_accumulation_steps = auto -> gradient_accumulation_steps = 2 (auto: --gradient_accumulation_steps)"
expect "$log" "  train_batch_size = auto -> train_batch_size = 16 (4 per device x 2 accumulation x 2 ranks)"
expect "$log" "  gradient_clipping = auto -> max_grad_norm = 1.0 (auto: jobs/recipes/default.yaml:"
expect "$log" "  optimizer.params.lr = auto -> learning_rate = 0.0015 (auto: jobs/recipes/default.yaml:"
expect "$log" "  optimizer.params.betas = auto -> adam_beta1 = 0.9, adam_beta2 = 0.999 (auto: default)"
expect "$log" "  optimizer.params.weight_decay = auto -> weight_decay = 0.01 (auto: --weight_decay)"
expect "$log" "  bf16.enabled = auto -> bf16 = false (auto: jobs/recipes/default.yaml:"
expect "$log" "  zero_optimization.reduce_bucket_size = auto -> reduce_bucket_size = auto (16384 elements)"
expect "$log" "  zero_optimization.allgather_bucket_size = 200000000.0 -> allgather_bucket_size = 200000000"
expect "$log" "  zero_optimization.overlap_comm = true -> overlap_comm = true"
expect "$log" "  zero_optimization.contiguous_gradients = true: no effect"
expect "$log" "  fp16.enabled = auto -> fp16 = false (auto: default)"
expect "$log" "  fp16.initial_scale_power = 16 -> initial_scale_power = 16"
expect "$log" "  scheduler.type = WarmupDecayLR -> lr_scheduler_type = ds_warmup_decay; DeepSpeed's WarmupDecayLR"
expect "$log" "  scheduler.params.warmup_num_steps = auto -> warmup_steps = 0, warmup_ratio = 0.05 (auto: default)"
expect "$log" "  scheduler.params.total_num_steps = auto -> max_steps = 6, num_train_epochs = 8.0 (auto: --max_steps)"
expect "$log" "ZeRO stage 2 over 2 ranks"
expect "$log" "global batch 16 = 4 per device x 2 accumulation x 2 ranks; 6 steps"

# Stage 3 with ZeRO++ (qwZ, qgZ, hpZ) and DeepSpeed's stage-3 tuning keys.
run "${common[@]}" --deepspeed jobs/recipes/ds_zero3_zeropp.json --output_dir "$tmp/z3" > "$tmp/z3.log" 2>&1 \
  || { cat "$tmp/z3.log"; fail "stage-3 run with ds_zero3_zeropp.json failed"; }
log=$tmp/z3.log
expect "$log" "  zero_optimization.stage = 3 -> zero_stage = 3"
expect "$log" "  zero_optimization.zero_hpz_partition_size = 2 -> zero_hpz_partition_size = 2"
expect "$log" "  zero_optimization.zero_quantized_weights = true -> zero_quantized_weights = true"
expect "$log" "  zero_optimization.zero_quantized_gradients = true -> zero_quantized_gradients = true"
expect "$log" "  zero_optimization.reduce_bucket_size = 10000000.0 -> reduce_bucket_size = 10000000"
expect "$log" "  gradient_clipping = 1.0 -> max_grad_norm = 1.0"
expect "$log" "  train_micro_batch_size_per_gpu = auto -> per_device_train_batch_size = 8 (auto: jobs/recipes/default.yaml:"
expect "$log" "  zero_optimization.stage3_prefetch_bucket_size = auto: no effect"
expect "$log" "  zero_optimization.offload_param.device = none: as shardft"
expect "$log" "ZeRO stage 3 over 2 ranks (mpi), shard groups of 2, 1 replica, qwZ int8 weights, qgZ int4 gradients, hpZ groups of 2"

for run_dir in z2 z3; do
  python3 - "$tmp/$run_dir/metrics.jsonl" "$run_dir" <<'PY' || exit 1
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps, summary = lines[:-1], lines[-1]
assert [s["step"] for s in steps] == [3, 6], steps
assert summary["world_size"] == 2 and summary["zero_stage"] == int(sys.argv[2][1]), summary
assert steps[-1]["loss"] < steps[0]["loss"], f"loss did not fall: {steps}"
if sys.argv[2] == "z2":
    # WarmupDecayLR, all "auto": 6 steps, warm-up ceil(0.05 * 6) = 1 (DeepSpeed: 2), peak 1.5e-3 (the recipe's).
    # Step 3 runs at iteration 1, the warm-up's end (log 2 / log 2); step 6 at iteration 4: (6 - 4) / (6 - 2)
    # of the peak.
    for s, want in zip(steps, [1.5e-3, 0.75e-3]):
        assert abs(s["learning_rate"] - want) <= 1e-12 * want, (s, want)
print(sys.argv[2], "ok:", [round(s["loss"], 4) for s in steps])
PY
done

# WarmupCosineLR as HF's docs write it, at 1 rank with a log line per step: each step's learning_rate is
# DeepSpeed's (the reference transcription, checked against DeepSpeed's own module).
cosine='{"optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
  "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": "auto", "warmup_min_ratio": 0,
    "warmup_num_steps": 3, "cos_min_ratio": 0.0001, "warmup_type": "log"}}}'
printf '%s\n' "$cosine" > "$tmp/cosine.json"
timeout 180 "$bin" train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 1 --do_eval false \
  --deepspeed "$tmp/cosine.json" --output_dir "$tmp/cosine" > "$tmp/cosine.log" 2>&1 \
  || { cat "$tmp/cosine.log"; fail "run with a WarmupCosineLR scheduler block failed"; }
expect "$tmp/cosine.log" "  scheduler.type = WarmupCosineLR -> lr_scheduler_type = ds_warmup_cosine"
expect "$tmp/cosine.log" "  scheduler.params.warmup_num_steps = 3 -> warmup_steps = 3"
python3 - "$tmp/cosine/metrics.jsonl" "$tmp/cosine.json" <<'PY' || exit 1
import json, sys
sys.path.insert(0, "tests/reference")
import make_deepspeed_lr as ref
case = {"ds_config": json.load(open(sys.argv[2])), "recipe": ["--learning_rate=1.5e-3", "--max_steps=6"], "steps": 6}  # the recipe's lr
want = ref.run(ref, case)
got = [s["learning_rate"] for s in [json.loads(l) for l in open(sys.argv[1])][:-1]]
assert want[:2] == [0.0, 0.0], want  # the engine's offset: step 1 before the scheduler's first step, step 2 at log(1)
assert len(got) == 6 and all(abs(g - w) <= 1e-12 * w for g, w in zip(got, want)), (got, want)
print("cosine ok:", got)
PY

# Keys shardft does not implement: an error naming the file and the key, before any training, at 2 ranks too.
expect_rejected() {  # expect_rejected NAME JSON 'KEY' [NP]
  printf '%s\n' "$2" > "$tmp/$1.json"
  if [ "${4:-1}" = 2 ]; then
    run train --config jobs/recipes/default.yaml --deepspeed "$tmp/$1.json" --output_dir "$tmp/out-$1" > "$tmp/$1.log" 2>&1
  else
    timeout 60 "$bin" train --config jobs/recipes/default.yaml --deepspeed "$tmp/$1.json" --output_dir "$tmp/out-$1" \
      > "$tmp/$1.log" 2>&1
  fi
  code=$?
  [ $code -ne 0 ] && [ $code -ne 124 ] || { cat "$tmp/$1.log"; fail "$1: exit $code, expected an error"; }
  expect "$tmp/$1.log" "$tmp/$1.json: DeepSpeed key $3 is not supported by shardft"
  [ -e "$tmp/out-$1/model.safetensors" ] && fail "$1: a rejected config trained"
  echo "ok   rejected $3"
}
expect_rejected offload '{"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": true}}}' \
  "'zero_optimization.offload_optimizer.device'" 2
expect_rejected unknown '{"zero_optimization": {"stage": 3, "mics_shard_size": 2}}' "'zero_optimization.mics_shard_size'" 2
expect_rejected fp16 '{"fp16": {"enabled": true, "auto_cast": true}}' "'fp16.auto_cast'"
expect_rejected scheduler '{"scheduler": {"type": "OneCycle", "params": {"cycle_max_lr": 0.01}}}' "'scheduler.type'"
expect_rejected scheduler_param '{"scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 10}}}' \
  "'scheduler.params.total_num_steps'"
expect_rejected optimizer '{"optimizer": {"type": "Lamb"}}' "'optimizer.type'"
echo "deepspeed_configs: ok"
