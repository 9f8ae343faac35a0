#!/usr/bin/env bash
# One huge JSONL record (a 60 MB user turn, truncated to max_seq_length like any long sample) trains with
# a bounded memory overhead: the run's peak RSS exceeds the same run's without the record by at most 4x
# the record's size (it was 34x: every byte became an id, a label and a 16-byte span before truncation).
# Peak RSS from the kernel's accounting of the child (getrusage), no extra tools.
# Usage: huge_record_memory.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

head -n 20 jobs/data/sft_train.jsonl > "$tmp/small.jsonl"
python3 - "$tmp/huge.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"messages": [{"role": "user", "content": "upper: " + "x" * (60 << 20)},
                                     {"role": "assistant", "content": "ABC"}]}) + "\n")
PY
cat "$tmp/small.jsonl" >> "$tmp/huge.jsonl"
peak_kib() {  # DATASET NAME: the train run's peak RSS in KiB
  python3 - "$bin" "$1" "$tmp/$2" <<'PY'
import resource, subprocess, sys
bin, data, out = sys.argv[1:]
r = subprocess.run([bin, "train", "--config", "jobs/recipes/default.yaml", "--dataset_path", data, "--max_steps", "1",
                    "--do_eval", "false", "--per_device_train_batch_size", "4", "--dataset_cache_dir", "",
                    "--output_dir", out], capture_output=True, text=True)
if r.returncode != 0:
    sys.stderr.write(r.stdout[-2000:] + r.stderr[-2000:])
    sys.exit(1)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
base=$(peak_kib "$tmp/small.jsonl" small) || fail "the run without the huge record"
huge=$(peak_kib "$tmp/huge.jsonl" huge) || fail "the run with the huge record"
record_kib=$(( $(stat -c %s "$tmp/huge.jsonl") / 1024 ))
over=$(( huge - base ))
echo "peak RSS: $base KiB without, $huge KiB with a $record_kib KiB record (+$over KiB)"
[ "$over" -le $(( 4 * record_kib )) ] || fail "the huge record costs $over KiB over the run, more than 4x its $record_kib KiB"
echo "ok"
