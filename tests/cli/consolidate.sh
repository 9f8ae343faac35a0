#!/usr/bin/env bash
# consolidate: the safetensors of a checkpoint equal the trained weights bit for bit (fp32), bf16 is
# their rounding, a small --max_shard_size splits the model with an index, an export into a used folder
# replaces the earlier export's weight files; inspect verifies checksums
# and names a damaged or truncated file.
# Usage: consolidate.sh SHARDFT_BINARY SOURCE_DIR H5_OFFSET_HELPER
set -u
bin=$1; src=$2; h5_offset=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
for np in 1 2 4; do
  timeout 300 mpirun -np $np --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 "$bin" train --config jobs/recipes/default.yaml \
    --max_steps 12 --logging_steps 4 --do_eval false --zero_stage 3 --per_device_train_batch_size $((16 / np)) \
    --output_dir "$tmp/run$np" > "$tmp/run$np.log" 2>&1 || { cat "$tmp/run$np.log"; fail "training at $np ranks"; }
  "$bin" consolidate "$tmp/run$np/checkpoint-12" --output "$tmp/hf$np" > /dev/null || fail "consolidate ($np ranks)"
  cmp -s <(tail -c +1 "$tmp/hf$np/model.safetensors") "$tmp/run$np/model.safetensors" \
    || fail "consolidated safetensors differ from the trained weights ($np ranks)"
  echo "ok   $np ranks: consolidated model.safetensors equals the trained weights byte for byte"
done
"$bin" consolidate "$tmp/run2/checkpoint-12" --output "$tmp/bf" --dtype bf16 > /dev/null || fail "bf16 consolidate"
"$bin" consolidate "$tmp/run2/checkpoint-12" --output "$tmp/sh" --max_shard_size 400KB > "$tmp/sh.log" || fail "sharded consolidate"
python3 - "$tmp/hf2" "$tmp/bf" "$tmp/sh" <<'PY' || exit 1
import json, struct, sys, os
def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__": continue
        b, e = h["data_offsets"]
        out[name] = (h["dtype"], h["shape"], raw[8 + n + b:8 + n + e])
    return out
full = read(os.path.join(sys.argv[1], "model.safetensors"))
bf = read(os.path.join(sys.argv[2], "model.safetensors"))
for name, (dt, shape, data) in full.items():
    f = struct.unpack(f"<{len(data)//4}f", data)
    bits = struct.unpack(f"<{len(data)//4}I", data)
    rounded = [((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF for u in bits]
    assert bf[name][0] == "BF16" and bf[name][1] == shape, name
    assert list(struct.unpack(f"<{len(rounded)}H", bf[name][2])) == rounded, f"{name}: bf16 is not the rounding of fp32"
index = json.load(open(os.path.join(sys.argv[3], "model.safetensors.index.json")))
files = sorted(set(index["weight_map"].values()))
assert len(files) > 1, files
merged = {}
for f in files: merged.update(read(os.path.join(sys.argv[3], f)))
assert merged.keys() == full.keys() and all(merged[k][2] == full[k][2] for k in full), "sharded model differs"
assert index["metadata"]["total_size"] == sum(len(v[2]) for v in full.values())
cfg = json.load(open(os.path.join(sys.argv[1], "config.json")))
assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["hidden_size"] == 128, cfg
print(f"ok   bf16 = rounding of fp32; {len(files)} shards + index reassemble the model; config.json")
PY
# Into a used folder: the sharded export's index and shards go when a single file replaces them, and the
# single file goes when shards replace it (what HF's save_pretrained does); nothing stale is left to load.
"$bin" consolidate "$tmp/run2/checkpoint-12" --output "$tmp/sh" > "$tmp/resh.log" || fail "consolidate over a sharded export"
grep -q "^removed $tmp/sh/model.safetensors.index.json (left by an earlier export)" "$tmp/resh.log" \
  || { cat "$tmp/resh.log"; fail "the stale index was not reported removed"; }
ls "$tmp/sh" | grep -qE '^model-[0-9]{5}-of-[0-9]{5}\.safetensors$|index\.json$' && { ls "$tmp/sh"; fail "stale shards left"; }
cmp -s "$tmp/sh/model.safetensors" "$tmp/hf2/model.safetensors" || fail "the re-export differs from a fresh one"
"$bin" consolidate "$tmp/run2/checkpoint-12" --output "$tmp/sh" --max_shard_size 400KB > /dev/null || fail "re-shard"
[ -e "$tmp/sh/model.safetensors" ] && fail "the single-file export was left beside the shards"
[ -e "$tmp/sh/model.safetensors.index.json" ] || fail "no index after re-sharding"
echo "ok   consolidate into a used folder replaces the earlier export's weight files"

"$bin" inspect "$tmp/run2/checkpoint-12" > "$tmp/inspect.log" || fail "inspect of a good checkpoint"
grep -q "rank-00001.h5: .* checksums ok" "$tmp/inspect.log" || fail "inspect output"
# One flipped bit inside the raw data of the last dataset (its offset from the HDF5 helper: the bytes
# after it are HDF5's own metadata, whose damage libhdf5 does not always survive).
at=$("$h5_offset" "$tmp/run2/checkpoint-12/rank-00001.h5" slices) || fail "no offset for slices"
python3 - "$tmp/run2/checkpoint-12/rank-00001.h5" "$at" <<'PY'
import sys
p = sys.argv[1]; d = bytearray(open(p, "rb").read()); d[int(sys.argv[2]) + 3] ^= 0x40; open(p, "wb").write(bytes(d))
PY
"$bin" inspect "$tmp/run2/checkpoint-12" > "$tmp/bad.log" 2>&1 && fail "a flipped byte went unnoticed"
grep -q "rank-00001.h5: checksum mismatch (file xxh3_64:" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "checksum error does not name the file"; }
truncate -s 3000 "$tmp/run4/checkpoint-12/rank-00002.h5"
"$bin" inspect "$tmp/run4/checkpoint-12" > "$tmp/trunc.log" 2>&1 && fail "a truncated shard went unnoticed"
grep -q "rank-00002.h5" "$tmp/trunc.log" || { cat "$tmp/trunc.log"; fail "truncation error does not name the file"; }
"$bin" consolidate "$tmp/nowhere" --output "$tmp/x" > "$tmp/none.log" 2>&1 && fail "consolidate of nothing succeeded"
grep -q "metadata.json is missing" "$tmp/none.log" || fail "missing checkpoint error"
echo "consolidate: ok"
