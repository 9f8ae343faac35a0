#!/usr/bin/env bash
# `shardft plot`: a short training run, then PNG charts of its metrics.jsonl, each read back by an
# independent checker (python3 stdlib: signature, chunk CRCs, IHDR, IEND, the inflated pixels) and
# required to show a coloured line; --output; bad input named with file and line; and the training
# progress bar: drawn on a terminal (under `script`), absent from a log file.
# Usage: plot.sh SHARDFT_BINARY SOURCE_DIR
set -u
bin=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 2
fail() { echo "FAIL: $*"; exit 1; }

"$bin" train --config jobs/recipes/default.yaml --max_steps 12 --logging_steps 2 --eval_samples 8 \
  --output_dir "$tmp/run" > "$tmp/train.log" 2>&1 || { cat "$tmp/train.log"; fail "train exited non-zero"; }
grep -q $'\r' "$tmp/train.log" && fail "a progress bar was drawn into a log file"
grep -q '"step_seconds"' "$tmp/run/metrics.jsonl" || fail "metrics.jsonl has no step_seconds"

"$bin" plot "$tmp/run" > "$tmp/plot.log" 2>&1 || { cat "$tmp/plot.log"; fail "plot exited non-zero"; }
cat "$tmp/plot.log"
for f in loss learning_rate grad_norm step_time tokens_per_second; do
  grep -q "wrote $tmp/run/plots/$f.png" "$tmp/plot.log" || fail "plot does not report $f.png"
done

python3 - "$tmp/run/plots" <<'PY' || exit 1
import os, struct, sys, zlib

def read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: no PNG signature"
    at, chunks = 8, []
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        crc, = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xffffffff, f"{path}: bad CRC in {kind}"
        chunks.append((kind, body))
        at += 12 + length
    assert at == len(data), f"{path}: bytes after the last chunk"
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b""), f"{path}: chunks {[c[0] for c in chunks]}"
    w, h, depth, colour, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (w, h) == (800, 500), f"{path}: {w}x{h}"
    assert (depth, colour, comp, filt, interlace) == (8, 2, 0, 0, 0), f"{path}: IHDR {depth, colour, comp, filt, interlace}"
    raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    stride = w * 3
    assert len(raw) == h * (stride + 1), f"{path}: {len(raw)} bytes of pixels"
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):  # the five PNG filters
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], (prev[i - 3] if i >= 3 else 0)
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            else: assert f == 0, f"{path}: filter {f}"
        rows.append(bytes(line)); prev = line
    return w, h, rows

d = sys.argv[1]
for name in ("loss", "learning_rate", "grad_norm", "step_time", "tokens_per_second"):
    path = os.path.join(d, name + ".png")
    w, h, rows = read_png(path)
    pixels = [tuple(r[i:i + 3]) for r in rows for i in range(0, len(r), 3)]
    background = pixels[0]
    drawn = sum(p != background for p in pixels)
    coloured = sum(1 for p in pixels if max(p) - min(p) > 60)  # the series; axes and text are grey
    assert drawn > 2000, f"{path}: only {drawn} pixels differ from the background"
    assert coloured > 300, f"{path}: only {coloured} coloured pixels: no line"
    if name == "loss":
        orange = sum(1 for p in pixels if p[0] > 200 and 80 < p[1] < 160 and p[2] < 60)
        assert orange > 20, f"{path}: no eval_loss point ({orange} orange pixels)"
    print(f"{name}.png ok: {w}x{h}, {drawn} drawn pixels, {coloured} coloured")
PY

"$bin" plot "$tmp/run/metrics.jsonl" --output "$tmp/elsewhere" > "$tmp/out.log" 2>&1 || { cat "$tmp/out.log"; fail "plot --output failed"; }
[ -s "$tmp/elsewhere/loss.png" ] || fail "--output: no loss.png in the given directory"

# Bad input: each error names the file (and the line).
expect_error() {  # expect_error WHAT PATTERN ARGS...
  local what=$1 pattern=$2; shift 2
  "$bin" plot "$@" > "$tmp/err.log" 2>&1 && fail "$what: plot succeeded"
  grep -qF -- "$pattern" "$tmp/err.log" || { cat "$tmp/err.log"; fail "$what: error does not say '$pattern'"; }
}
expect_error "missing" "$tmp/nothing/metrics.jsonl: cannot open" "$tmp/nothing"
mkdir -p "$tmp/empty" && : > "$tmp/empty/metrics.jsonl"
expect_error "empty" "$tmp/empty/metrics.jsonl: empty" "$tmp/empty"
mkdir -p "$tmp/broken" && { head -n 2 "$tmp/run/metrics.jsonl"; echo '{"step": 6, "loss": 2.'; } > "$tmp/broken/metrics.jsonl"
expect_error "malformed" "$tmp/broken/metrics.jsonl:3: not a JSON object" "$tmp/broken"
expect_error "no run" "usage: shardft plot RUN_DIR"
expect_error "unknown option" "unknown option '--width'" "$tmp/run" --width 3

# On a terminal the run draws its progress bar (script gives it one); the log lines stay whole.
if command -v script > /dev/null; then
  script -qec "'$bin' train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 3 --do_eval false \
    --output_dir '$tmp/tty'" "$tmp/tty.log" > /dev/null 2>&1 < /dev/null || { cat "$tmp/tty.log"; fail "train under a terminal failed"; }
  grep -qE $'\rtrain \\[#{20}\\] 100% 6/6 steps' "$tmp/tty.log" || { cat -v "$tmp/tty.log"; fail "no progress bar on a terminal"; }
  grep -qE "^\{'loss': " <(tr '\r' '\n' < "$tmp/tty.log" | sed 's/\x1b\[K//g') || fail "log lines garbled by the bar"
  # Only stdout a terminal: the bar goes to stdout. disable_tqdm turns it off. Under jobs/mpirun.sh (whose
  # ranks' stdout is a pseudo-terminal even into a file) it shows on a terminal and stays out of a log.
  script -qec "'$bin' train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 3 --do_eval false \
    --output_dir '$tmp/tty2' 2> '$tmp/tty2.err'" "$tmp/tty2.log" > /dev/null 2>&1 < /dev/null || fail "stdout-only terminal run failed"
  grep -qE $'\rtrain \\[#{20}\\] 100% 6/6 steps' "$tmp/tty2.log" || { cat -v "$tmp/tty2.log"; fail "no progress bar on stdout"; }
  grep -q $'\r' "$tmp/tty2.err" && fail "a bar went to stderr, which is a file"
  script -qec "'$bin' train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 3 --do_eval false \
    --disable_tqdm true --output_dir '$tmp/tty3'" "$tmp/tty3.log" > /dev/null 2>&1 < /dev/null || fail "disable_tqdm run failed"
  grep -q 'train \[' "$tmp/tty3.log" && { cat -v "$tmp/tty3.log"; fail "disable_tqdm: a progress bar was drawn"; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  script -qec "SHARDFT_BIN='$bin' jobs/mpirun.sh -np 1 train --config jobs/recipes/default.yaml --max_steps 6 \
    --logging_steps 3 --do_eval false --output_dir '$tmp/tty4'" "$tmp/tty4.log" > /dev/null 2>&1 < /dev/null \
    || { cat "$tmp/tty4.log"; fail "mpirun.sh on a terminal failed"; }
  grep -qE $'\rtrain \\[#{20}\\] 100% 6/6 steps' "$tmp/tty4.log" || { cat -v "$tmp/tty4.log"; fail "mpirun.sh: no bar on a terminal"; }
  SHARDFT_BIN=$bin jobs/mpirun.sh -np 1 train --config jobs/recipes/default.yaml --max_steps 6 --logging_steps 3 \
    --do_eval false --output_dir "$tmp/tty5" > "$tmp/tty5.log" 2>&1 || { cat "$tmp/tty5.log"; fail "mpirun.sh into a file failed"; }
  grep -q $'\r' "$tmp/tty5.log" && { cat -v "$tmp/tty5.log" | head; fail "mpirun.sh drew a bar into a log file"; }
else
  echo "note: no 'script' command; the terminal progress bar is not exercised"
fi
echo "plot: ok"
