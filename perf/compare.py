#!/usr/bin/env python3
"""Compare two Google Benchmark JSON files and flag regressions.

usage: compare.py BASELINE.json CURRENT.json [--threshold 0.10] [--time real_time|cpu_time]

Benchmarks are matched by name (run_name). For each one the metric is the memory counter peak_bytes
when both files have it (the memory/ family; lower is better), else the first rate counter the
baseline has, in this order: GFLOPS, tokens_per_second, bytes_per_second, items_per_second (higher
is better); without one, the time (real_time by default; lower is better). With
--benchmark_repetitions the median aggregate is used (the mean when there is no median; the median
of the repetitions when the file holds no aggregates).

Exit status: 0 when no benchmark is worse than the threshold, 1 when one is (or a benchmark reported
an error in CURRENT), 2 on a usage or file error. Benchmarks present in only one file are listed and
do not fail the comparison.
"""
import argparse
import json
import statistics
import sys

RATE_COUNTERS = ("GFLOPS", "tokens_per_second", "bytes_per_second", "items_per_second")
MEMORY_COUNTERS = ("peak_bytes",)  # lower is better
TIME_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class Entry:
    """One benchmark's figures, reduced to a single value per metric."""

    def __init__(self, name, values, error=None):
        self.name = name
        self.values = values  # metric -> value (times in ns)
        self.error = error


def die(msg):
    print(f"compare.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        die(f"cannot read {path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        die(f"{path}: not a Google Benchmark JSON file (no 'benchmarks' list)")

    runs = {}  # run name -> {"iterations": [...], "median": {...}, "mean": {...}, "error": str}
    order = []
    for b in doc["benchmarks"]:
        name = b.get("run_name") or b.get("name")
        if name is None:
            continue
        slot = runs.get(name)
        if slot is None:
            slot = runs[name] = {"iterations": [], "error": None}
            order.append(name)
        if b.get("error_occurred"):
            slot["error"] = b.get("error_message") or "error"
            continue
        values = metrics_of(b)
        if b.get("run_type") == "aggregate":
            agg = b.get("aggregate_name")
            if agg in ("median", "mean"):
                slot[agg] = values
        else:
            slot["iterations"].append(values)

    entries = {}
    for name in order:
        slot = runs[name]
        if "median" in slot:
            values = slot["median"]
        elif "mean" in slot:
            values = slot["mean"]
        elif slot["iterations"]:
            keys = set.intersection(*(set(v) for v in slot["iterations"]))
            values = {k: statistics.median(v[k] for v in slot["iterations"]) for k in keys}
        else:
            values = {}
        entries[name] = Entry(name, values, slot["error"])
    return entries


def metrics_of(b):
    scale = TIME_TO_NS.get(b.get("time_unit", "ns"), 1.0)
    values = {}
    for key in ("real_time", "cpu_time"):
        if isinstance(b.get(key), (int, float)):
            values[key] = float(b[key]) * scale
    for key in RATE_COUNTERS + MEMORY_COUNTERS:
        if isinstance(b.get(key), (int, float)):
            values[key] = float(b[key])
    return values


def pick_metric(base, cur, time_field):
    """The metric to compare and whether higher is better; None when the two share none."""
    for key in MEMORY_COUNTERS:
        if key in base.values and key in cur.values:
            return key, False
    for key in RATE_COUNTERS:
        if key in base.values and key in cur.values:
            return key, True
    if time_field in base.values and time_field in cur.values:
        return time_field, False
    return None, None


def fmt(metric, v):
    if metric in ("real_time", "cpu_time"):
        for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
            if v >= scale:
                return f"{v / scale:.3f} {unit}"
        return f"{v:.1f} ns"
    if metric == "GFLOPS":
        return f"{v:.2f} GFLOP/s"
    if metric == "peak_bytes":
        return f"{v / 1e6:.1f} MB"
    suffix = {"tokens_per_second": "tok/s", "bytes_per_second": "B/s", "items_per_second": "it/s"}[metric]
    for prefix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= scale:
            return f"{v / scale:.3f} {prefix}{suffix}"
    return f"{v:.3f} {suffix}"


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare two Google Benchmark JSON files.")
    ap.add_argument("baseline")
    ap.add_argument("current")
    ap.add_argument("--threshold", type=float, default=0.10,
                    help="fail when a benchmark is worse by more than this fraction (default 0.10)")
    ap.add_argument("--time", dest="time_field", choices=("real_time", "cpu_time"), default="real_time",
                    help="time field used when a benchmark has no rate counter (default real_time)")
    args = ap.parse_args(argv)
    if args.threshold < 0:
        ap.error("--threshold must be >= 0")

    base = load(args.baseline)
    cur = load(args.current)

    rows, regressed, errored, incomparable = [], [], [], []
    for name, b in sorted(base.items()):
        if name not in cur:
            continue
        c = cur[name]
        if c.error:
            errored.append((name, c.error))
            continue
        metric, higher_better = pick_metric(b, c, args.time_field)
        if metric is None:
            incomparable.append(name)
            continue
        bv, cv = b.values[metric], c.values[metric]
        change = (cv - bv) / bv if bv else 0.0
        worse = -change if higher_better else change  # fraction by which CURRENT is worse
        if worse > args.threshold:
            status = "REGRESSION"
            regressed.append(name)
        elif -worse > args.threshold:
            status = "improved"
        else:
            status = "ok"
        rows.append((name, metric, fmt(metric, bv), fmt(metric, cv), f"{change * 100:+.1f}%", status))

    header = ("benchmark", "metric", "baseline", "current", "change", "status")
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join("{:<%d}" % w if i < 2 else "{:>%d}" % w for i, w in enumerate(widths))
    print(line.format(*header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line.format(*r))

    only_base = sorted(n for n in base if n not in cur)
    only_cur = sorted(n for n in cur if n not in base)
    if only_base:
        print(f"\nonly in baseline ({len(only_base)}): " + ", ".join(only_base))
    if only_cur:
        print(f"\nonly in current ({len(only_cur)}): " + ", ".join(only_cur))
    if incomparable:
        print(f"\nno common metric ({len(incomparable)}): " + ", ".join(incomparable))
    for name, msg in errored:
        print(f"\nERROR in current: {name}: {msg}")

    print(f"\n{len(rows)} compared, {len(regressed)} regressed, threshold {args.threshold * 100:.0f}% "
          f"(rates: higher is better; times: lower is better; change is current vs baseline)")
    for name in regressed:
        print(f"REGRESSION: {name}")
    return 1 if regressed or errored else 0


if __name__ == "__main__":
    sys.exit(main())
