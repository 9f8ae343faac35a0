#!/usr/bin/env python3
"""Registers and spills of every GPU kernel of a CUDA build, from ptxas: a check that needs no GPU.

    python3 jobs/gpu/kernel_registers.py [--build-dir build-cuda] [--files kernels/swiglu_bf16.cpp ...]
                                         [--max-spill-bytes N] [--jobs J]

Compiles each source of the build's kernels/ (or the files named) again with its own command from
compile_commands.json plus `-Xptxas -v`, into a temporary folder, and prints per kernel: registers per
thread, the blocks of 256 threads the registers let one SM hold (65536 registers, 2048 threads), and
the bytes of spill stores. A kernel whose registers spill to local memory pays a memory access per
spilled value; one holding more than 128 registers fits one such block per SM. Exits 1 when a kernel
of shardft's own (not Kokkos' internals) spills more than --max-spill-bytes (default: no limit).
Run it from the repository root the build was made from.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

PROPS = re.compile(r"Function properties for (\S+)")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")


def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return out.stdout.split("\n")


def short_name(demangled):
    """The kernel's own function and template arguments, without Kokkos' launch wrappers and views."""
    name = re.sub(r"^.*?Impl::Parallel(For|Reduce|Scan)<", "", demangled)
    name = re.sub(r"Kokkos::Impl::CombinedFunctorReducer<", "", name)
    name = re.sub(r"_INTERNAL_\w+?::", "", name)
    name = re.sub(r"\((char const\*|Kokkos::View|shardft::).*", "", name)
    return name[:140]


def compile_with_ptxas_report(entry, out_dir):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    if "-o" in args:
        args[args.index("-o") + 1] = os.path.join(out_dir, os.path.basename(entry["file"]) + ".o")
    args += ["-Xptxas", "-v"]
    done = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{entry['file']}: the compile failed:\n{done.stderr[-2000:]}")
    return done.stderr


def kernels_of(report):
    """(mangled name, registers, spill store bytes) per kernel compiled for the device."""
    lines, found, current = report.split("\n"), [], None
    for i, line in enumerate(lines):
        m = PROPS.search(line)
        if m:
            current = m.group(1)
            continue
        m = SPILL.search(line)
        if m and current:
            regs = REGS.search(lines[i + 1]) if i + 1 < len(lines) else None
            if regs:  # a kernel; device functions compiled on their own (slow paths) have no count
                found.append((current, int(regs.group(1)), int(m.group(2))))
            current = None
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default="build-cuda")
    ap.add_argument("--files", nargs="*",
                    help="sources, relative to the repository root where this runs (default: kernels/*.cpp)")
    ap.add_argument("--max-spill-bytes", type=int, default=-1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    opt = ap.parse_args()
    db_path = os.path.join(opt.build_dir, "compile_commands.json")
    if not os.path.exists(db_path):
        sys.exit(f"kernel_registers.py: no {db_path}: configure a CUDA build first (jobs/gpu/build.sh)")
    root = os.getcwd()  # the repository the build was made from (run from its root)
    entries = json.load(open(db_path))
    if opt.files:
        wanted = {os.path.normpath(os.path.join(root, f)) for f in opt.files}
        chosen = [e for e in entries if os.path.normpath(e["file"]) in wanted]
        missing = wanted - {os.path.normpath(e["file"]) for e in chosen}
        if missing:
            sys.exit(f"kernel_registers.py: not in {db_path}: {', '.join(sorted(missing))}")
    else:
        chosen = [e for e in entries if re.search(r"/kernels/[^/]+\.cpp$", e["file"])]
    if not chosen or "nvcc" not in chosen[0].get("command", " ".join(chosen[0].get("arguments", []))):
        sys.exit(f"kernel_registers.py: {db_path} has no nvcc compiles of those files: is it a CUDA build?")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(opt.jobs) as pool:
        reports = pool.map(lambda e: (e["file"], compile_with_ptxas_report(e, tmp)), chosen)
        for path, report in reports:
            found = kernels_of(report)
            for (mangled, regs, spill), name in zip(found, demangle([k[0] for k in found])):
                rows.append((os.path.relpath(path, root), short_name(name), regs, spill, "shardft::" in name))
    rows.sort(key=lambda r: (-r[3], -r[2], r[0], r[1]))
    print(f"{'regs':>5} {'blocks/SM':>9} {'spill B':>8}  source: kernel")
    for src, name, regs, spill, own in rows:
        blocks = min(8, 65536 // (256 * regs))  # at most 2048 threads per SM
        print(f"{regs:>5} {blocks:>9} {spill:>8}  {src}: {name}")
    over = [r for r in rows if r[4] and opt.max_spill_bytes >= 0 and r[3] > opt.max_spill_bytes]
    spilling = sum(1 for r in rows if r[3] > 0)
    print(f"kernel_registers.py: {len(rows)} kernels in {len(chosen)} sources, {spilling} spill",
          file=sys.stderr)
    if over:
        print(f"kernel_registers.py: {len(over)} of shardft's kernels spill more than "
              f"{opt.max_spill_bytes} bytes", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
