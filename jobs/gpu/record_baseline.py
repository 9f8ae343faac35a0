#!/usr/bin/env python3
"""Records a GPU probe's result: the gpu-<card>.json that jobs/gpu/probe.sh writes into the device call's
$OUT becomes perf/baselines/gpu-<card>.json (the card's latest record, what later runs compare with)
and one row of the GPU baseline table in README.md, between the marker comments
<!-- gpu-baselines:begin --> and <!-- gpu-baselines:end -->: one row per recorded run (date, card,
commit), newest first; recording the same run again replaces its row.

  jobs/gpu/record_baseline.py RECORD.json [--root DIR]

--root: the repository to update (default: the one this script is in). Exit 2 when RECORD.json is not
a usable record (a key missing, no shardft step time, card 'none' from a --no-gpu run) or README.md
lacks the markers.
"""
import argparse
import json
import os
import re
import sys

BEGIN, END = "<!-- gpu-baselines:begin -->", "<!-- gpu-baselines:end -->"
KEYS = ("card", "date", "commit", "step_ms", "pytorch_step_ms", "shardft_over_pytorch", "tokens_per_s", "mfu",
        "peak_memory_bytes", "pytorch_peak_memory_bytes", "unit_tests", "kernel_shares")
HEADER = ["| date (UTC) | card | commit | ms/step | tokens/s | MFU | peak memory | PyTorch ms/step | "
          "PyTorch peak memory | shardft ÷ PyTorch | unit tests (pass/fail/skip) |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]


def fail(msg):
    print(f"record_baseline.py: {msg}", file=sys.stderr)
    sys.exit(2)


def num(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def gib(b):
    return f"{b / 2**30:.1f} GiB" if isinstance(b, (int, float)) else "-"


def row(r):
    commit = (r.get("commit") or "unknown")[:10]
    if str(r.get("tree_dirty")).lower() == "true":
        commit += " (dirty)"
    u = r.get("unit_tests") or {}
    tests = "/".join(str(u.get(k, "-")) if u.get(k) is not None else "-" for k in ("passed", "failed", "skipped"))
    return (f"| {r['date'][:16].replace('T', ' ')} | {r['card']} | {commit} | {num(r['step_ms'], '.1f')} | "
            f"{num(r.get('tokens_per_s'), ',.0f')} | {num(r.get('mfu'), '.3f')} | {gib(r.get('peak_memory_bytes'))} | "
            f"{num(r.get('pytorch_step_ms'), '.1f')} | {gib(r.get('pytorch_peak_memory_bytes'))} | "
            f"{num(r.get('shardft_over_pytorch'), '.2f')} | {tests} |")


def key_of(line):
    """(date, card, commit) of a table row: the run it records."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return tuple(cells[:3]) if len(cells) >= 3 else None


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = ap.parse_args(argv[1:])
    try:
        with open(args.record) as f:
            rec = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{args.record}: not a JSON record ({e})")
    missing = [k for k in KEYS if k not in rec]
    if missing:
        fail(f"{args.record}: not a probe record, missing {', '.join(missing)}")
    if not re.fullmatch(r"[a-z0-9-]+", str(rec["card"])) or rec["card"] == "none":
        fail(f"{args.record}: card '{rec['card']}': a --no-gpu run or an unknown GPU, nothing to record")
    if not isinstance(rec["step_ms"], (int, float)):
        fail(f"{args.record}: no shardft step time (the bench stage did not pass): nothing to record")

    readme = os.path.join(args.root, "README.md")
    text = open(readme).read()
    if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
        fail(f"{readme}: no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    new = row(rec)
    rows = [ln for ln in body.splitlines() if ln.startswith("|") and not ln.startswith(("| date", "| ---"))]
    rows = [ln for ln in rows if key_of(ln) != key_of(new)] + [new]
    rows.sort(key=lambda ln: key_of(ln)[0], reverse=True)
    text = head + BEGIN + "\n" + "\n".join(HEADER + rows) + "\n" + END + tail

    out = os.path.join(args.root, "perf", "baselines", f"gpu-{rec['card']}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    with open(readme, "w") as f:
        f.write(text)
    print(f"record_baseline.py: {out} written; README.md table has {len(rows)} row(s)")
    print(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
