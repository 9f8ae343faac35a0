#!/usr/bin/env python3
"""The parts of jobs/gpu/probe.sh that read and write structured files (standard library only: it runs
on the host Python of a bare GPU machine). It shares validate_util.py's recipe writer and parsers.

  result FILE STATUS SECONDS [KEY=VALUE ...]         one stage's outcome
  versions OUT PREFIX TORCH_PYTHON LDD_TXT           GPU, driver, CUDA / cuDNN / NCCL / torch, glibc
  bench-result DIR LOG OUT SECONDS RC CAP PEAK KEY=VALUE ...
  torch-result RAW LOG OUT SECONDS RC CAP MEMDIR
  kernels LOG OUT SECONDS RC CAP
  gtest XML LOG OUT SECONDS RC CAP MODE LISTED
  train METRICS LOG OUT SECONDS RC CAP EPOCHS
  report STATE OUT_DIR MODE BUDGET                   probe.md, probe.json, gpu-<card>.json
  card GPU_NAME                                      h100, h200, ... (the record's file name)
"""
import glob
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import validate_util as vu  # noqa: E402  (beside this file)

TIMED_OUT = (124, 137)  # timeout(1): the cap passed (137: killed after the grace period)


def first_error(log, n=8):
    """The first line that says what went wrong (shardft's 'error:', an exception's what()), else the log's tail."""
    try:
        lines = open(log, errors="replace").read().splitlines()
    except OSError:
        return ""
    for pat in (r"shardft: .*error", r"what\(\)", r"[Ee]rror|FAILED|Traceback|Killed"):
        for line in lines:
            if re.search(pat, line):
                return line.strip()[:500]
    return " ".join(lines[-n:]).strip()[-500:]


def capped(rc, cap):
    return f"stopped at its {cap} s cap" if int(rc) in TIMED_OUT else f"exited {rc}"


def sh(cmd, timeout=30):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v or ""))


def card_of(name):
    """h100 / h200 from the GPU's name; else its model number, lower case; 'none' without a GPU."""
    if not name:
        return "none"
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name.upper().replace("NVIDIA", ""))
    return m.group(1).lower() if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:20]


# ---- versions ----------------------------------------------------------------------------------

TORCH_CODE = r"""
import json, torch
out = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
try:
    import transformers
    out["transformers"] = transformers.__version__
except Exception as e:
    out["transformers"] = f"not importable: {e}"
try:
    out["cudnn"] = torch.backends.cudnn.version()
except Exception as e:
    out["cudnn"] = f"? ({e})"
try:
    v = torch.cuda.nccl.version()
    out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else v
except Exception as e:
    out["nccl"] = f"? ({e})"
if out["cuda_available"]:
    out["device"] = torch.cuda.get_device_name(0)
    out["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
print(json.dumps(out))
"""


def libstdcxx_max():
    """The newest GLIBCXX_ version the machine's libstdc++.so.6 provides, and its path."""
    path = None
    for line in sh(["ldconfig", "-p"]).splitlines():
        if "libstdc++.so.6 " in line and "x86-64" in line:
            path = line.split("=>")[-1].strip()
            break
    for cand in ([path] if path else []) + glob.glob("/usr/lib/x86_64-linux-gnu/libstdc++.so.6*"):
        try:
            data = open(os.path.realpath(cand), "rb").read()
        except OSError:
            continue
        vs = set(re.findall(rb"GLIBCXX_(\d+\.\d+(?:\.\d+)*)", data))
        if vs:
            return max((v.decode() for v in vs), key=version_tuple), cand
    return None, None


def cmd_versions(out, prefix, torch_py, ldd_txt):
    v = {"host": platform.node(), "cores": os.cpu_count(),
         "os": sh(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]), "kernel": platform.release()}
    for line in open("/proc/cpuinfo", errors="replace"):
        if line.startswith("model name"):
            v["cpu"] = line.split(":", 1)[1].strip()
            break
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal"):
            v["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    v["glibc"] = platform.libc_ver()[1] or sh(["getconf", "GNU_LIBC_VERSION"]).replace("glibc ", "")
    v["glibcxx"], v["libstdcxx"] = libstdcxx_max()
    if shutil.which("nvidia-smi"):
        q = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used,compute_cap",
                "--format=csv,noheader,nounits"])
        gpus = [dict(zip(("name", "driver", "memory_total_mib", "memory_used_mib", "compute_cap"),
                         [x.strip() for x in line.split(",")])) for line in q.splitlines() if line.strip()]
        v["gpus"] = gpus
        m = re.search(r"CUDA Version:\s*([\d.]+)", sh(["nvidia-smi"]))
        v["driver_cuda"] = m.group(1) if m else None
    else:
        v["gpus"] = []
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc:
        m = re.search(r"release ([\d.]+)", sh([nvcc, "--version"]))
        v["nvcc"] = m.group(1) if m else None
    kit = vu.read_json(os.path.join(prefix, "kit.json"), {})
    v["kit"] = {k: kit.get(k) for k in ("commit", "dirty", "packed", "packed_on", "kokkos", "kokkos_arch", "nvcc",
                                         "cudart", "glibc_needed", "glibcxx_needed", "provenance")}
    linked = {}
    for link in sorted(glob.glob(os.path.join(prefix, "lib", "cuda", "*"))):
        linked[os.path.basename(link)] = os.path.realpath(link)
    v["cuda_libs_linked"] = linked
    v["torch_python"] = torch_py
    try:
        r = subprocess.run([torch_py, "-c", TORCH_CODE], capture_output=True, text=True, timeout=120)
        v["torch"] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {
            "error": (r.stderr.strip().splitlines() or ["?"])[-1][:300]}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        v["torch"] = {"error": f"{torch_py}: {e}"[:300]}
    # The kit's needs against the machine's libc and libstdc++.
    problems = []
    if kit.get("glibc_needed") and v["glibc"] and version_tuple(v["glibc"]) < version_tuple(kit["glibc_needed"]):
        problems.append(f"glibc {v['glibc']} < the kit's GLIBC_{kit['glibc_needed']}")
    if kit.get("glibcxx_needed") and v["glibcxx"] and version_tuple(v["glibcxx"]) < version_tuple(kit["glibcxx_needed"]):
        problems.append(f"libstdc++ has GLIBCXX_{v['glibcxx']} < the kit's GLIBCXX_{kit['glibcxx_needed']}")
    v["abi_problems"] = problems
    missing = []
    if os.path.exists(ldd_txt):
        for line in open(ldd_txt, errors="replace"):
            if "not found" in line:
                missing.append(line.strip())
    v["ldd_not_found"] = missing
    vu.write_json(out, v)
    return 0


# ---- stage results -------------------------------------------------------------------------------

def sampled_peak(memdir):
    """(peak - before) in bytes from nvidia-smi samples in MiB; None without samples."""
    try:
        before = int(open(os.path.join(memdir, "before_mib.txt")).read().split()[0])
    except (OSError, ValueError, IndexError):
        before = None
    peak, first = vu.gpu_peak_mib(os.path.join(memdir, "gpu_memory_mib.txt"))
    if peak is None:
        return {}
    base = before if before is not None else first
    return {"peak_gpu_memory_mib": peak, "gpu_memory_before_mib": base,
            "peak_memory_bytes": (peak - base) * 2**20}


def cmd_bench_result(d, log, out, seconds, rc, cap, peak, *items):
    s = vu.shape_of(items)
    rows = [r for r in vu.metrics_lines(os.path.join(d, "run", "metrics.jsonl")) if "step_seconds" in r]
    timed = [r for r in rows if r.get("step", 0) > s["warmup"]]
    fpt = vu.flops_per_token(s)
    extra = {"shape": s, "parameters": vu.params(s), "flops_per_token": fpt, "peak_tflops": float(peak),
             "cap_s": int(cap), "exit": int(rc), **vu.startup_facts(log), **sampled_peak(d)}
    if not timed or (int(rc) != 0 and len(timed) < s["steps"]):
        extra["reason"] = f"shardft {capped(rc, cap)} after {len(timed)} of {s['steps']} timed steps: {first_error(log)}"
        vu.stage_result(out, "failed", seconds, **extra)
        return 0
    step = statistics.median(r["step_seconds"] for r in timed)
    tps = s["batch"] * s["seq"] / step
    extra.update({"framework": "shardft", "timed_steps": len(timed), "step_ms": step * 1e3, "tokens_per_second": tps,
                  "mfu": fpt * tps / (float(peak) * 1e12) if float(peak) > 0 else None,
                  "all_step_ms": [r["step_seconds"] * 1e3 for r in timed],
                  "mfu_logged_median": statistics.median(r.get("mfu", 0.0) for r in timed),
                  "loss_first_last": [rows[0].get("loss"), rows[-1].get("loss")],
                  "losses": [r.get("loss") for r in rows],
                  "peak_host_rss_bytes": max(r.get("peak_memory_bytes", 0) for r in rows)})
    closing = [r for r in vu.metrics_lines(os.path.join(d, "run", "metrics.jsonl")) if "train_runtime" in r]
    for key in ("device_peak_memory_bytes", "gemm_tensor_core_flop_share", "gemm_widened_elements_per_step",
                "kernel_launches_per_layer", "host_syncs_per_step", "device_allocations_per_step"):
        if closing and key in closing[-1]:
            extra[key] = closing[-1][key]
    if int(rc) != 0:
        extra["note"] = f"every timed step logged; shardft then {capped(rc, cap)} (in its closing model save)"
    vu.stage_result(out, "ok", seconds, **extra)
    return 0


def cmd_torch_result(raw, log, out, seconds, rc, cap, memdir):
    data = vu.read_json(raw)
    if int(rc) != 0 or not data:
        vu.stage_result(out, "failed", seconds, cap_s=int(cap),
                        reason=f"torch_bench.py {capped(rc, cap)}: {first_error(log)}")
    else:
        vu.stage_result(out, "ok", seconds, cap_s=int(cap), **data, **sampled_peak(memdir))
    return 0


NCU_METRICS = ("Duration", "DRAM Throughput", "Compute (SM) Throughput", "Achieved Occupancy", "Registers Per Thread",
               "Block Size", "Grid Size")


def ncu_kernels(csv_path):
    """Per profiled kernel (ncu --csv --page details): the enclosing function of its lambda and NCU_METRICS."""
    import csv
    import io
    if not os.path.exists(csv_path):
        return []
    rows = list(csv.reader(io.StringIO(open(csv_path, errors="replace").read())))
    if not rows:
        return []
    hdr, out = rows[0], {}
    for r in rows[1:]:
        d = dict(zip(hdr, r))
        if "ID" not in d or "Kernel Name" not in d:
            continue
        m = re.search(r"Parallel(?:For|Reduce|Scan)<(?:CombinedFunctorReducer<)?(?:void )?(?:<?unnamed>::|\w+::)*"
                      r"([A-Za-z_]\w*(?:<[^>(]*>)?)", d["Kernel Name"])
        k = out.setdefault(d["ID"], {"kernel": m.group(1) if m else d["Kernel Name"][:80]})
        if d.get("Metric Name") in NCU_METRICS:
            k[d["Metric Name"]] = f'{d.get("Metric Value", "")} {d.get("Metric Unit", "")}'.strip()
    return [out[i] for i in sorted(out, key=lambda x: int(x) if x.isdigit() else 0)]


KERNEL_ROW = re.compile(r"^\s*([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s\s(.+)$")


def cmd_kernels(log, out, seconds, rc, cap, layers="4", variant=""):
    lines = open(log, errors="replace").read().splitlines() if os.path.exists(log) else []
    rows, launches, inside, how = [], None, False, None
    for line in lines:
        m = re.search(r"kernel times \(SHARDFT_KERNEL_TIMES, (.*?)\): (\d+) Kokkos kernel launches", line)
        if m:
            rows, how, launches, inside = [], m.group(1), int(m.group(2)), True
            continue
        if inside:
            r = KERNEL_ROW.match(line)
            if r:
                rows.append({"kernel": r.group(5).strip(), "seconds": float(r.group(1)), "share": float(r.group(2)) / 100,
                             "count": int(r.group(3)), "mean_us": float(r.group(4))})
            elif line.strip() and not line.lstrip().startswith(("seconds", "...")):
                inside = False
    extra = {"cap_s": int(cap), "exit": int(rc), "launches": launches, "timing": how, "layers": int(layers),
             "variant": variant.strip(), "kernels": rows}
    if not rows:
        extra["reason"] = f"no kernel table in the log (shardft {capped(rc, cap)}): {first_error(log)}"
        vu.stage_result(out, "failed", seconds, **extra)
    else:
        if int(rc) != 0:
            extra["note"] = f"table printed; shardft then {capped(rc, cap)}"
        vu.stage_result(out, "ok", seconds, **extra)
    return 0


def gtest_from_log(log):
    """Counts from gtest's console output: what a run stopped by its cap leaves (no XML then)."""
    passed, failed, skipped, running = set(), set(), set(), None
    for line in open(log, errors="replace") if os.path.exists(log) else []:
        m = re.match(r"^\[\s*(RUN|OK|FAILED|SKIPPED)\s*\] (\S+)(?: \(\d+ ms\))?", line)
        if not m:
            continue
        tag, name = m.groups()
        if tag == "RUN":
            running = name
        elif "(" in line or tag == "SKIPPED":
            {"OK": passed, "FAILED": failed, "SKIPPED": skipped}[tag].add(name)
            running = None if name == running else running
    return passed, failed, skipped, running


def cmd_gtest(xml, log, out, seconds, rc, cap, mode, listed):
    rc, listed = int(rc), int(listed or 0)
    passed = failed = skipped = 0
    failures, skips = [], {}
    source = "xml"
    try:
        root = ET.parse(xml).getroot()
        for tc in root.iter("testcase"):
            name = f"{tc.get('classname')}.{tc.get('name')}"
            if tc.find("failure") is not None:
                failed += 1
                failures.append(name)
            elif tc.get("result") == "skipped" or tc.find("skipped") is not None:
                skipped += 1
                msg = (tc.find("skipped").get("message") if tc.find("skipped") is not None else "") or "(no message)"
                skips.setdefault(msg.strip().splitlines()[-1][:200] if msg.strip() else "(no message)", []).append(name)
            elif tc.get("status", "run") == "run":
                passed += 1
    except (OSError, ET.ParseError):
        source = "console log (no XML: the run did not finish)"
        p, f, s, running = gtest_from_log(log)
        passed, failed, skipped, failures = len(p), len(f), len(s), sorted(f)
        if running:
            failures.append(f"{running} (running when stopped)")
    extra = {"listed": listed, "passed": passed, "failed": failed, "skipped": skipped, "failures": failures[:60],
             "skip_reasons": skips, "source": source, "cap_s": int(cap), "exit": rc}
    if mode == "nogpu":
        tail = first_error(log)
        vu.stage_result(out, "skipped", seconds, **extra, reason=(
            f"no GPU: the binary loads and lists {listed} tests (Kokkos is not started to list them); running "
            f"them starts Kokkos's CUDA backend, which on the toolkit's stub driver ends with: {tail}"))
        return 0
    if rc in TIMED_OUT:
        extra["reason"] = f"stopped at its {cap} s cap after {passed + failed + skipped} of {listed} tests"
        status = "failed"
    elif failed or rc != 0 or not (passed + skipped):
        status = "failed"
        if not failed:
            extra["reason"] = f"shardft_unit_tests exited {rc}: {first_error(log)}"
    else:
        status = "ok"
    vu.stage_result(out, status, seconds, **extra)
    return 0


def cmd_train(metrics, log, out, seconds, rc, cap, epochs):
    vu.cmd_train(metrics, log, out, seconds, rc, 1)
    r = vu.read_json(out, {})
    r.update({"cap_s": int(cap), "epochs": float(epochs)})
    if int(rc) in TIMED_OUT:
        r["reason"] = f"stopped at its {cap} s cap after {r.get('steps', 0)} logged steps"
    elif int(rc) != 0:
        r["reason"] = f"shardft exited {rc}: {first_error(log)}"
    vu.write_json(out, r)
    return 0


# ---- report ------------------------------------------------------------------------------------

STAGES = ("setup", "bench", "torch", "kernels", "test", "train", "ncu", "overlap", "nondet", "sms", "sms2", "chunk",
          "lora", "torch_lora")
TITLES = {"setup": "unpack, ldd, versions, MPI", "bench": "1B step, shardft", "torch": "1B step, PyTorch",
          "kernels": "kernel shares", "test": "unit tests", "train": "default recipe",
          "ncu": "elementwise kernels under ncu", "overlap": "1B step, optimizer_overlap: false",
          "nondet": "1B step, deterministic_attention: false", "sms": "1B step, optimizer_overlap_sms",
          "sms2": "1B step, optimizer_overlap_sms (second value)", "chunk": "1B step, logits_chunk_tokens",
          "lora": "1B LoRA step, shardft", "torch_lora": "1B LoRA step, PyTorch + PEFT"}


def sms_name(r):
    """The sms stages' row name: the SMs that run's GEMMs left to the overlapped optimizer step."""
    return f"shardft, optimizer_overlap_sms: {(r.get('shape') or {}).get('overlap_sms', '?')}"


def fmt(v, spec=".3g"):
    return vu.fmt(v, spec)


def mib(b):
    return f"{b / 2**20:,.0f} MiB" if isinstance(b, (int, float)) else "-"


def cmd_report(state, out_dir, mode, budget):
    R = {s: vu.read_json(os.path.join(state, "results", f"{s}.json"), None) for s in STAGES}
    V = vu.read_json(os.path.join(state, "results", "versions.json"), {}) or {}
    kit = V.get("kit") or {}
    gpu = (V.get("gpus") or [{}])[0]
    T = V.get("torch") or {}
    card = card_of(gpu.get("name"))
    b, tb, k, t, tr = (R.get(s) or {} for s in ("bench", "torch", "kernels", "test", "train"))
    ok = lambda r: r.get("status") == "ok"  # noqa: E731
    ratio = b["step_ms"] / tb["step_ms"] if ok(b) and ok(tb) and tb.get("step_ms") else None
    lb, ltb = R.get("lora") or {}, R.get("torch_lora") or {}
    lora_ratio = lb["step_ms"] / ltb["step_ms"] if ok(lb) and ok(ltb) and ltb.get("step_ms") else None
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = {
        "card": card, "gpu_name": gpu.get("name"), "date": now, "commit": kit.get("commit"),
        "tree_dirty": kit.get("dirty"),
        "step_ms": b.get("step_ms") if ok(b) else None,
        "pytorch_step_ms": tb.get("step_ms") if ok(tb) else None,
        "shardft_over_pytorch": ratio,
        "tokens_per_s": b.get("tokens_per_second") if ok(b) else None,
        "mfu": b.get("mfu") if ok(b) else None,
        "peak_memory_bytes": b.get("peak_memory_bytes") if ok(b) else None,
        "pytorch_peak_memory_bytes": tb.get("peak_memory_bytes") if ok(tb) else None,
        "lora_step_ms": lb.get("step_ms") if ok(lb) else None,
        "pytorch_lora_step_ms": ltb.get("step_ms") if ok(ltb) else None,
        "lora_shardft_over_pytorch": lora_ratio,
        "lora_peak_memory_bytes": lb.get("peak_memory_bytes") if ok(lb) else None,
        "pytorch_lora_peak_memory_bytes": ltb.get("peak_memory_bytes") if ok(ltb) else None,
        "unit_tests": {"passed": t.get("passed"), "failed": t.get("failed"), "skipped": t.get("skipped"),
                       "status": t.get("status")},
        "kernel_shares": [{"kernel": r["kernel"], "share": round(r["share"], 4), "count": r["count"]}
                          for r in (k.get("kernels") or [])[:12]],
        "shape": "llama-1b: hidden 2048, 16 layers, 32/8 heads, intermediate 8192, vocab 128256, 2 x 2048 tokens, bf16",
        "peak_memory_measure": "nvidia-smi memory.used, max over the run minus before it (CUDA context included)",
        "driver": gpu.get("driver"), "torch": T.get("torch"),
    }
    statuses = {s: (R.get(s) or {}).get("status", "not run") for s in STAGES}
    summary = {"mode": mode, "date": now, "card": card, "budget_s": float(budget), "statuses": statuses,
               "passed": all(v in ("ok", "skipped", "not run") for v in statuses.values())}
    os.makedirs(out_dir, exist_ok=True)
    vu.write_json(os.path.join(out_dir, "probe.json"), {"summary": summary, "record": record, "versions": V, "stages": R})
    vu.write_json(os.path.join(out_dir, f"gpu-{card}.json"), record)

    L = [f"# shardft GPU probe ({'GPU' if mode == 'gpu' else '--no-gpu: this machine, no GPU'})", "",
         f"- when: {now}; host {V.get('host')}: {V.get('cpu')}, {V.get('cores')} cores, {V.get('memory_gib')} GiB, "
         f"{V.get('os')}, glibc {V.get('glibc')}, libstdc++ GLIBCXX_{V.get('glibcxx')}",
         f"- GPU: {gpu.get('name', 'none')}" + (f", driver {gpu.get('driver')} (CUDA {V.get('driver_cuda')}), "
                                                f"{gpu.get('memory_total_mib')} MiB, {gpu.get('memory_used_mib')} MiB in use "
                                                f"before, compute capability {gpu.get('compute_cap')}" if gpu else ""),
         f"- torch ({V.get('torch_python')}): " + (f"{T.get('torch')} (CUDA {T.get('torch_cuda')}), cuDNN {T.get('cudnn')}, "
                                                   f"NCCL {T.get('nccl')}, transformers {T.get('transformers')}, "
                                                   f"CUDA available: {T.get('cuda_available')}"
                                                   if "torch" in T else f"not importable: {T.get('error')}"),
         f"- kit: binaries of commit {kit.get('commit')} (tree dirty: {kit.get('dirty')}), packed {kit.get('packed')} on "
         f"{kit.get('packed_on')}; Kokkos {kit.get('kokkos')} ({kit.get('kokkos_arch')}), nvcc {kit.get('nvcc')}, "
         f"CUDA runtime {kit.get('cudart')}; the machine's nvcc: {V.get('nvcc', 'none')}",
         "- CUDA libraries from this machine: " + (", ".join(f"{n} -> {p}" for n, p in (V.get("cuda_libs_linked") or {}).items())
                                                   or "none"),
         f"- ldd: {len(V.get('ldd_not_found') or [])} unresolved"
         + (": " + "; ".join((V.get("ldd_not_found") or [])[:8]) if V.get("ldd_not_found") else "")
         + ("; ABI: " + "; ".join(V["abi_problems"]) if V.get("abi_problems") else ""),
         "", "| stage | what | status | seconds | cap | note |", "| --- | --- | --- | --- | --- | --- |"]
    for s in STAGES:
        r = R.get(s)
        if not r:
            L.append(f"| {s} | {TITLES[s]} | not run | | | |")
            continue
        note = str(r.get("reason") or r.get("note") or "").replace("|", "/").replace("\n", " ")
        L.append(f"| {s} | {TITLES[s]} | {r['status']} | {fmt(r.get('seconds'), '.0f')} | {r.get('cap_s', '')} | {note[:400]} |")

    L += ["", "## 1B training step (Llama-3.2-1B shape, 2 x 2048 tokens, bf16)", ""]
    if b.get("shape"):
        s = b["shape"]
        L.append(f"hidden {s.get('hidden')}, {s.get('layers')} layers, {s.get('heads')}/{s.get('kv_heads')} heads, "
                 f"intermediate {s.get('inter')}, vocab {s.get('vocab')} (tied), {fmt(b.get('parameters', 0) / 1e9, '.3f')} B "
                 f"parameters; median of {s.get('steps')} timed steps after {s.get('warmup')} warm-up, unfenced. MFU = "
                 f"{fmt(b.get('flops_per_token'), '.4g')} FLOP/token x tokens/s / {fmt(b.get('peak_tflops'))} TFLOP/s. "
                 "Peak memory: nvidia-smi's memory.used sampled every 200 ms, max minus before the run (CUDA context "
                 "included, the same measure for both).")
    L += ["", "| framework | ms/step | tokens/s | MFU | peak GPU memory | notes |", "| --- | --- | --- | --- | --- | --- |"]
    # The variant stages' rows: whether each step's loss equals bench's, in the variant's own words.
    variants = {"overlap": ("every step's loss equals bench's",
                            "every step's loss DIFFERS from bench's (the overlap must not change the arithmetic)"),
                "nondet": ("losses equal bench's (atomic dq: low bits may differ)",
                           "losses differ from bench's (atomic dq: low bits may differ)")}
    for stage in ("sms", "sms2"):
        variants[stage] = ("losses equal bench's", "losses differ from bench's (GEMMs sized for fewer SMs may round "
                                                   "differently)")
    variants["chunk"] = ("losses equal bench's", "losses differ from bench's in low bits (the head's gradient "
                                                 "summed over other chunks)")
    loss_notes = {stage: (same if R[stage].get("losses") == b.get("losses") else differ)
                  for stage, (same, differ) in variants.items() if ok(R.get(stage) or {}) and ok(b)}
    for stage, name, r in (("bench", "shardft", b), ("overlap", "shardft, optimizer_overlap: false", R.get("overlap") or {}),
                           ("nondet", "shardft, deterministic_attention: false", R.get("nondet") or {}),
                           ("sms", sms_name(R.get("sms") or {}), R.get("sms") or {}),
                           ("sms2", sms_name(R.get("sms2") or {}), R.get("sms2") or {}),
                           ("chunk", "shardft, logits_chunk_tokens: "
                                     f"{((R.get('chunk') or {}).get('shape') or {}).get('logits_chunk', '?')}",
                            R.get("chunk") or {}),
                           ("torch", "PyTorch", tb)):
        if not r:
            continue
        if not ok(r):
            L.append(f"| {name} | - | - | - | - | {r.get('status')}: {str(r.get('reason', ''))[:300].replace('|', '/')} |")
            continue
        if stage != "torch":
            notes = f"logged MFU {fmt(r.get('mfu_logged_median'), '.3f')}; loss {' -> '.join(fmt(x, '.3f') for x in r.get('loss_first_last') or [])}"
            if stage in loss_notes:
                notes += f"; {loss_notes[stage]}"
        else:
            notes = (f"{r.get('framework', '')}; {r.get('device', '')}; attention {r.get('attn_implementation')}; "
                     f"allocator peak {mib(r.get('max_memory_allocated_bytes'))} allocated / "
                     f"{mib(r.get('max_memory_reserved_bytes'))} reserved")
        L.append(f"| {name} | {fmt(r.get('step_ms'), '.1f')} | {fmt(r.get('tokens_per_second'), '.0f')} | "
                 f"{fmt(r.get('mfu'), '.3f')} | {mib(r.get('peak_memory_bytes'))} | {notes} |")
    L.append("")
    L.append(f"shardft ÷ PyTorch (step time): **{fmt(ratio, '.2f')}**" if ratio else
             "shardft ÷ PyTorch: - (needs both steps)")
    if lb or ltb:
        L += ["", "## 1B LoRA step (the same shape, LoRA on every linear layer, base frozen in bf16)", "",
              "| framework | ms/step | tokens/s | peak GPU memory | notes |", "| --- | --- | --- | --- | --- |"]
        for name, r in (("shardft", lb), ("PyTorch", ltb)):
            if not r:
                continue
            if not ok(r):
                L.append(f"| {name} | - | - | - | {r.get('status')}: {str(r.get('reason', ''))[:300].replace('|', '/')} |")
                continue
            shape = r.get("shape") or {}
            notes = (f"r {shape.get('lora_r')}, lora_dropout {shape.get('lora_dropout')}; "
                     + (f"loss {' -> '.join(fmt(x, '.3f') for x in r.get('loss_first_last') or [])}" if name == "shardft"
                        else f"{r.get('lora')}; {r.get('trainable_parameters')} trainable; allocator peak "
                             f"{mib(r.get('max_memory_allocated_bytes'))}"))
            L.append(f"| {name} | {fmt(r.get('step_ms'), '.1f')} | {fmt(r.get('tokens_per_second'), '.0f')} | "
                     f"{mib(r.get('peak_memory_bytes'))} | {notes} |")
        L += ["", f"shardft ÷ PyTorch (LoRA step time): **{fmt(lora_ratio, '.2f')}**" if lora_ratio else
              "shardft ÷ PyTorch (LoRA): - (needs both steps)"]

    if k:
        timing = k.get("timing") or "every kernel fenced"
        variant = f"{k['variant']}, " if k.get("variant") else ""
        L += ["", f"## Kernel shares (SHARDFT_KERNEL_TIMES=1, {k.get('layers', 4)} layers, {variant}steps 2-4, {timing})", ""]
        if k.get("kernels"):
            caveat = ("Fencing exposes launch latency: read the shares, not the sum." if "fenced" in timing and "unfenced" not in timing
                      else "Device time per kernel from CUDA events on the stream, the step running as it does untimed.")
            L += [f"{k.get('launches')} Kokkos kernel launches. {caveat}", "",
                  "| seconds | share | count | mean µs | kernel |", "| --- | --- | --- | --- | --- |"]
            for r in k["kernels"][:20]:
                L.append(f"| {r['seconds']:.4f} | {100 * r['share']:.1f} % | {r['count']} | {r['mean_us']:.1f} | "
                         f"`{r['kernel'].replace('|', '/')[:120]}` |")
        else:
            L.append(f"{k.get('status')}: {k.get('reason', '')}")

    nk = ncu_kernels(os.path.join(state, "results", "ncu.csv"))
    if nk:
        L += ["", "## Elementwise kernels under Nsight Compute (one decoder layer of the 1B shape)", "",
              "| kernel | " + " | ".join(NCU_METRICS) + " |", "| --- |" + " --- |" * len(NCU_METRICS)]
        for k in nk:
            L.append(f"| `{k['kernel']}` | " + " | ".join(str(k.get(m, "")) for m in NCU_METRICS) + " |")

    if t:
        L += ["", "## Unit tests", "",
              f"{t.get('listed')} listed: {t.get('passed')} passed, {t.get('failed')} failed, {t.get('skipped')} skipped "
              f"({fmt(t.get('seconds'), '.0f')} s, from the {t.get('source')})" +
              (f"; the stage was skipped: {t.get('reason')}" if t.get("status") == "skipped" else ".")]
        if t.get("failures"):
            L.append("Failed: " + ", ".join(t["failures"]))
        for reason, names in (t.get("skip_reasons") or {}).items():
            L.append(f"- skipped ({len(names)}): {', '.join(names[:6])}{' ...' if len(names) > 6 else ''}: {reason}")
    if tr:
        L += ["", "## Default recipe (jobs/recipes/default.yaml, one GPU)", ""]
        if tr.get("status") == "skipped":
            L.append(f"skipped: {tr.get('reason')}")
        else:
            L.append(f"{fmt(tr.get('epochs'), 'g')} epochs, {tr.get('steps')} steps in {fmt(tr.get('train_runtime'), '.1f')} s: "
                     f"held-out exact match **{fmt(tr.get('eval_exact_match'), '.3f')}** (bar 0.90), eval loss "
                     f"{fmt(tr.get('eval_loss'), '.4f')}; {tr.get('status')}{': ' + tr['reason'] if tr.get('reason') else ''}.")
    L += ["", f"Record for jobs/gpu/record_baseline.py: gpu-{card}.json. Logs: probe-logs.tar.xz.", ""]
    with open(os.path.join(out_dir, "probe.md"), "w") as f:
        f.write("\n".join(L))
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "result":
        return vu.stage_result(args[0], args[1], args[2], **vu.kv_args(args[3:])) or 0
    if cmd == "card":
        print(card_of(args[0] if args else ""))
        return 0
    table = {"versions": cmd_versions, "bench-result": cmd_bench_result, "torch-result": cmd_torch_result,
             "kernels": cmd_kernels, "gtest": cmd_gtest, "train": cmd_train, "report": cmd_report}
    if cmd not in table:
        print(f"probe_util.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return table[cmd](*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
