#!/usr/bin/env bash
# report_to: tensorboard writes event files that TensorBoard's own reader (the tensorboard package's
# event_accumulator, in the test venv) reads back: every number of metrics.jsonl, step records and the
# closing record, under HF's tags (train/x, eval/x) at its step, equal to the jsonl's value as a float.
# The folder: logging_dir, output_dir/runs/<run_name>, and none at all without report_to.
# Usage: tensorboard_report.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }
py="$src/.cache/hfvenv/bin/python"
[ -x "$py" ] || fail "$py is missing: run jobs/install-test-deps.sh (jobs/run-tests.sh does)"

train() {
  "$bin" train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 2 --eval_samples 8 "$@" \
    > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "train $* exited non-zero"; }
}

train --output_dir "$tmp/plain"
[ -e "$tmp/plain/runs" ] && fail "a run without report_to wrote $tmp/plain/runs"
grep -q "TensorBoard" "$tmp/train.log" && fail "a run without report_to mentions TensorBoard"

train --output_dir "$tmp/named" --report_to tensorboard --run_name sft-test
grep -q "TensorBoard: event files in $tmp/named/runs/sft-test" "$tmp/train.log" || { cat "$tmp/train.log"; fail "no log line naming the folder"; }

train --output_dir "$tmp/run" --report_to all --logging_dir "$tmp/tb"
"$py" - "$tmp/run/metrics.jsonl" "$tmp/tb" "$tmp/named/runs/sft-test" <<'PY' || exit 1
import json, struct, sys, collections
from tensorboard.backend.event_processing import event_accumulator

def tensorboard_values(folder):
    acc = event_accumulator.EventAccumulator(folder, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    got = collections.Counter()
    for tag in acc.Tags()["scalars"]:
        for e in acc.Scalars(tag):
            got[(tag, e.step, e.value)] += 1
    return got

as_float = lambda v: struct.unpack("f", struct.pack("f", v))[0]
expected = collections.Counter()
records = [json.loads(line) for line in open(sys.argv[1])]
for r in records:
    step = r["step"] if "step" in r else r["global_step"]
    for k, v in r.items():
        if k == "step" or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        tag = "eval/" + k[5:] if k.startswith("eval_") else "train/" + k
        expected[(tag, step, as_float(v))] += 1

got = tensorboard_values(sys.argv[2])
assert got == expected, f"TensorBoard and metrics.jsonl differ:\n only in TensorBoard: {got - expected}\n only in jsonl: {expected - got}"
tags = {t for t, _, _ in got}
for want in ("train/loss", "train/learning_rate", "train/grad_norm", "train/epoch", "train/tokens_per_second",
             "train/mfu", "train/peak_memory_bytes", "train/train_runtime", "eval/loss"):
    assert want in tags, f"{want} missing from {sorted(tags)}"
steps = sorted({s for t, s, _ in got if t == "train/loss"})
assert steps == [2, 4, 6], steps
assert tensorboard_values(sys.argv[3]), "no scalars under output_dir/runs/<run_name>"
print(f"tensorboard: {sum(got.values())} scalars under {len(tags)} tags equal metrics.jsonl's")
PY
echo "PASS"
