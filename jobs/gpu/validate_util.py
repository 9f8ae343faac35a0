#!/usr/bin/env python3
"""The parts of jobs/gpu/validate.sh that read and write structured files (standard library only: it
runs on the host Python of a bare GPU machine).

  result FILE STATUS SECONDS [KEY=VALUE ...]       one stage's outcome, for the report
  kit-check PREFIX BUILD ROOT KOKKOS_SRC           did the build take every dependency from the kit?
  gtest JSON LOG OUT SECONDS RC MODE               unit-test counts, failures, skips with their reasons
  train METRICS LOG OUT SECONDS RC NP              the default recipe's result
  bench-recipe DIR PEAK KEY=VALUE ...              recipe + synthetic plain-text data of a Llama shape
  bench-result DIR LOG OUT SECONDS RC PEAK KEY=VALUE ...
  torch-result RAW LOG OUT SECONDS RC
  report STATE OUT_MD MODE KIT ROOT                the one report
"""
import glob
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import time


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def kv_args(items):
    out = {}
    for item in items:
        k, _, v = item.partition("=")
        for conv in (int, float):
            try:
                v = conv(v)
                break
            except ValueError:
                pass
        out[k] = v
    return out


def stage_result(path, status, seconds, **extra):
    write_json(path, {"status": status, "seconds": float(seconds), **extra})


# ---- kit-check ---------------------------------------------------------------------------------

def kit_copy(prefix, path):
    """The kit's copy of a file found outside the prefix, if the kit has one (also through /lib -> /usr/lib)."""
    if not os.path.isabs(path) or path.startswith(prefix + "/"):
        return None
    candidates = {path, os.path.realpath(path)}
    for p in list(candidates):
        if p.startswith("/usr/lib/"):
            candidates.add(p[len("/usr"):])
        elif p.startswith("/lib/"):
            candidates.add("/usr" + p)
    for p in candidates:
        if os.path.isfile(prefix + p) or os.path.islink(prefix + p):
            return prefix + p
    return None


def where(prefix, path, roots):
    if path.startswith(prefix + "/"):
        return "kit"
    if any(path.startswith(r + "/") for r in roots):
        return "project"
    return "host"


def cmd_kit_check(prefix, build, root, kokkos_src):
    prefix, build, root = (os.path.realpath(p) for p in (prefix, build, root))
    roots = [root, build, os.path.realpath(kokkos_src), os.path.realpath(os.path.join(root, ".cache"))]
    violations = []
    report = {"prefix": prefix}
    owners = {}
    if os.path.exists(os.path.join(prefix, "owners.tsv")):
        for line in open(os.path.join(prefix, "owners.tsv")):
            path, _, pkg = line.rstrip("\n").partition("\t")
            owners[os.path.normpath(path.lstrip("."))] = pkg

    def owner(path):
        return owners.get("/" + os.path.relpath(os.path.realpath(path), prefix), "?")

    # 1. what CMake found
    found = []
    keys = re.compile(r"^(MPI_|MPIEXEC_EXECUTABLE|HDF5_|BLAS_|CBLAS_|yaml-cpp_DIR|nlohmann_json_DIR|GTest_DIR|"
                      r"benchmark_DIR|ZLIB_|PCRE2_|ICU_UC_|PKG_CONFIG_EXECUTABLE|Kokkos_DIR|CUDAToolkit_|NCCL_)")
    for line in open(os.path.join(build, "CMakeCache.txt"), errors="replace"):
        m = re.match(r"^([^#/][^:=]*):[A-Z]+=(.*)$", line.rstrip("\n"))
        if not m or not keys.match(m.group(1)):
            continue
        for value in m.group(2).split(";"):
            for path in re.findall(r"(?:^|(?<=\s)|(?<=-I)|(?<=-L))(/[^\s;]+)", value):
                if not os.path.exists(path):
                    continue
                w = where(prefix, path, roots)
                copy = kit_copy(prefix, path) if w == "host" else None
                found.append({"key": m.group(1), "path": path, "where": "SYSTEM COPY OF A KIT FILE" if copy else w})
                if copy:
                    violations.append(f"CMake {m.group(1)}: {path} (the kit has {copy})")
    report["cmake"] = found

    # 2. every header the compiler read (ninja's deps log, or the .d files of the Makefile generator)
    headers = set()
    if os.path.exists(os.path.join(build, "build.ninja")):
        out = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True).stdout
        headers.update(line.strip() for line in out.splitlines() if line.startswith("    "))
    for d in glob.glob(os.path.join(build, "**", "*.o.d"), recursive=True):
        text = open(d, errors="replace").read().replace("\\\n", " ")
        headers.update(t for t in text.split() if not t.endswith(":"))
    counts = {"kit": 0, "project": 0, "host": 0}
    for h in sorted(headers):
        h = os.path.normpath(os.path.join(build, h)) if not os.path.isabs(h) else os.path.normpath(h)
        w = where(prefix, h, roots)
        counts[w] += 1
        if w == "host":
            copy = kit_copy(prefix, h)
            if copy:
                violations.append(f"header {h} (the kit has {copy})")
    from_kit = {}
    for h in headers:
        h = os.path.normpath(os.path.join(build, h))
        if h.startswith(prefix + "/"):
            pkg = owner(h)
            from_kit[pkg] = from_kit.get(pkg, 0) + 1
    report["headers"] = {**counts, "total": len(headers), "kit_packages": dict(sorted(from_kit.items()))}

    # 3. what the loader resolves for the binaries, with no LD_LIBRARY_PATH
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    report["ldd"] = {}
    for binary in ("shardft", "tests/shardft_unit_tests"):
        path = os.path.join(build, binary)
        if not os.path.exists(path):
            continue
        out = subprocess.run(["ldd", path], capture_output=True, text=True, env=env).stdout
        libs = []
        for line in out.splitlines():
            m = re.match(r"\s*(\S+) => (not found|\S+)", line)
            if not m:
                continue
            name, target = m.groups()
            if target == "not found":
                libs.append({"lib": name, "path": None, "where": "NOT FOUND"})
                violations.append(f"ldd {binary}: {name} not found")
                continue
            w = where(prefix, os.path.realpath(target), roots) if not target.startswith(prefix) else "kit"
            copy = kit_copy(prefix, target) if w == "host" else None
            if copy:
                violations.append(f"ldd {binary}: {name} => {target} (the kit has {copy})")
            libs.append({"lib": name, "path": target, "where": "SYSTEM COPY OF A KIT FILE" if copy else w,
                         "package": owner(target) if w == "kit" else None})
        report["ldd"][binary] = libs
        rpath = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
        m = re.search(r"\((RPATH|RUNPATH)\)\s+Library (?:rpath|runpath): \[([^\]]*)\]", rpath)
        report.setdefault("rpath", {})[binary] = {"kind": m.group(1), "kit_dirs": sum(
            d.startswith(prefix) for d in m.group(2).split(":"))} if m else None
    report["violations"] = violations
    json.dump(report, sys.stdout, indent=1)
    print()
    for v in violations:
        print("kit-check:", v, file=sys.stderr)
    return 1 if violations else 0


# ---- unit tests --------------------------------------------------------------------------------

def cmd_gtest(json_path, log, out, seconds, rc, mode):
    data = read_json(json_path, {})
    tests = failed = skipped = 0
    failures = []
    for suite in data.get("testsuites", []):
        for t in suite.get("testsuite", []):
            tests += 1
            name = f"{suite['name']}.{t['name']}"
            if t.get("failures"):
                failed += 1
                failures.append(name)
            elif t.get("result") == "SKIPPED":
                skipped += 1
    # The skip messages, from the log: "... Skipped\n<message>\n[  SKIPPED ] Suite.Name"
    reasons = {}
    lines = open(log, errors="replace").read().splitlines() if os.path.exists(log) else []
    current, msg, in_skip = None, [], False
    for line in lines:
        if line.startswith("[ RUN      ]"):
            current, msg, in_skip = line.split("]", 1)[1].strip(), [], False
        elif line.rstrip().endswith(": Skipped") or line.strip() == "Skipped":
            in_skip = True
        elif line.startswith("[  SKIPPED ]") and current:
            reasons.setdefault(" ".join(msg).strip() or "(no message)", []).append(current)
            current = None
        elif in_skip and not line.startswith("["):
            msg.append(line.strip())
    status = "ok" if int(rc) == 0 and not failed and tests else "failed"
    extra = {"tests": tests, "passed": tests - failed - skipped, "failed": failed, "skipped": skipped,
             "failures": failures[:40], "skip_reasons": {k: v for k, v in reasons.items()}}
    if not tests:
        extra["reason"] = f"no test results (exit {rc}): " + tail(log, 5).strip()
    elif int(rc) != 0 and not failed:
        extra["reason"] = f"the test binary exited {rc}: " + tail(log, 5).strip()
    if mode == "nogpu":
        extra["note"] = ("no GPU, no CUDA in this build: the GPU tests are not compiled (CublasGemm.* in "
                         "tests/unit/test_cublas_gemm.cpp, which skip without a device in a CUDA build; the NCCL test is "
                         "in tests/mpi, not run by this script)")
    else:
        extra["note"] = "the NCCL test (tests/mpi/test_nccl.cpp, a GPU per rank) is not run by this script"
    stage_result(out, status, seconds, **extra)
    return 0


# ---- the default recipe ------------------------------------------------------------------------

def metrics_lines(path):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def startup_facts(log):
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    facts = {}
    for pat, key in ((r"MFU basis: ([^\n]+)", "mfu_basis"), (r"build: ([^\n]+)", "build"),
                     (r"attention: ([^\n]+)", "attention"), (r"(device work of step [^\n]+)", "device_work")):
        m = re.search(pat, text)
        if m:
            facts[key] = m.group(1).strip()[:300]
    return facts


def cmd_train(metrics, log, out, seconds, rc, np_):
    rows = metrics_lines(metrics)
    last = rows[-1] if rows else {}
    em = last.get("eval_exact_match")
    extra = {"ranks": int(np_), "eval_exact_match": em, "eval_loss": last.get("eval_loss"),
             "train_loss": last.get("train_loss"), "train_runtime": last.get("train_runtime"),
             "steps": max((r.get("step", 0) for r in rows), default=0), **startup_facts(log)}
    if int(rc) != 0:
        status, extra["reason"] = "failed", f"shardft exited {rc}: " + tail(log, 6).strip()[-600:]
    elif em is None:
        status, extra["reason"] = "failed", "no eval_exact_match in metrics.jsonl"
    elif em < 0.90:
        status, extra["reason"] = "failed", f"held-out exact match {em:.3f} < 0.90 (README's bar)"
    else:
        status = "ok"
    stage_result(out, status, seconds, **extra)
    return 0


# ---- benchmark ---------------------------------------------------------------------------------

def shape_of(items):
    return kv_args(items)


def flops_per_token(s):
    """shardft's count (train/mfu.cpp training_flops_per_token): 6 x matmul weights + 12 L d T attention."""
    d, h, g, layers, t = s["hidden"], s["heads"], s["kv_heads"], s["layers"], s["seq"]
    hd = d // h
    p_gemm = layers * (2 * d * h * hd + 2 * d * g * hd + 3 * d * s["inter"]) + s["vocab"] * d
    return 6.0 * p_gemm + 12.0 * layers * d * t


def params(s):
    d, h, g = s["hidden"], s["heads"], s["kv_heads"]
    hd = d // h
    per_layer = 2 * d * h * hd + 2 * d * g * hd + 3 * d * s["inter"] + 2 * d
    return s["layers"] * per_layer + s["vocab"] * d + d  # tied embeddings, final norm


def write_text_rows(path, rows, seq):
    """rows lines of {"text": ...}, plain words a little longer than seq bytes: with the byte tokenizer
    and no packing every row is truncated to exactly seq tokens (full causal rows, as PyTorch's)."""
    rng = random.Random(0)
    with open(path, "w") as f:
        for _ in range(rows):
            words = []
            while sum(len(w) + 1 for w in words) < seq + 64:
                words.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))))
            f.write(json.dumps({"text": " ".join(words)}) + "\n")


def cmd_bench_recipe(d, peak, *items):
    s = shape_of(items)
    write_text_rows(os.path.join(d, "data.jsonl"), (s["steps"] + s["warmup"] + 1) * s["batch"], s["seq"])
    recipe = {
        "vocab_size": s["vocab"], "hidden_size": s["hidden"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"], "intermediate_size": s["inter"],
        "rope_theta": s["rope_theta"], "rms_norm_eps": 1e-5, "tie_word_embeddings": "true",
        "max_position_embeddings": s["seq"],
        "dataset_path": os.path.join(d, "data.jsonl"), "dataset_text_field": "text", "max_seq_length": s["seq"],
        "packing": "false", "learning_rate": 1e-4, "lr_scheduler_type": "constant", "warmup_steps": 0,
        "weight_decay": 0.0, "max_grad_norm": 1.0, "per_device_train_batch_size": s["batch"],
        "gradient_accumulation_steps": 1, "max_steps": s["steps"] + s["warmup"], "logging_steps": 1,
        "save_strategy": "no", "output_dir": os.path.join(d, "run"), "seed": 0, "bf16": "true",
        # auto: cuDNN's fused attention where the GPU build has it and its self-test passes (the log says),
        # else the log-sum-exp kernels. Logits in chunks of 2048 tokens: two GEMMs of the LM head per step
        # instead of sixteen 256-row ones (the default suits a CPU's memory).
        "attn_implementation": "auto", "logits_chunk_tokens": 2048, "peak_tflops": float(peak), "do_eval": "false",
    }
    if "overlap" in s:  # probe.sh's overlap stage: the optimizer step under the next forward, or not
        recipe["optimizer_overlap"] = "true" if s["overlap"] else "false"
    if s.get("nondet"):  # probe.sh's nondet stage: cuDNN's atomic attention backward
        recipe["deterministic_attention"] = "false"
    if s.get("overlap_sms"):  # probe.sh's sms stages: SMs the GEMMs leave to the overlapped optimizer step
        recipe["optimizer_overlap_sms"] = int(s["overlap_sms"])
    if "logits_chunk" in s:  # probe.sh's chunk stage: another logits_chunk_tokens (auto: the run decides)
        recipe["logits_chunk_tokens"] = s["logits_chunk"]
    if s.get("lora_r"):  # probe.sh's lora stage: trl's LoRA on every linear layer (torch_bench.py's lora_r)
        recipe.update({"use_peft": "true", "lora_r": s["lora_r"], "lora_alpha": 2 * s["lora_r"],
                       "lora_dropout": s.get("lora_dropout", 0.05), "lora_target_modules": "all-linear"})
    with open(os.path.join(d, "recipe.yaml"), "w") as f:
        f.write(f"# jobs/gpu/validate.sh benchmark: {s['name']}, {params(s) / 1e9:.3f} B parameters\n")
        for k, v in recipe.items():
            f.write(f"{k}: {v}\n")
    return 0


def gpu_peak_mib(path):
    try:
        vals = [int(v) for v in open(path).read().split() if v.strip().isdigit()]
    except OSError:
        return None, None
    if not vals:
        return None, None
    return max(vals), vals[0]


def cmd_bench_result(d, log, out, seconds, rc, peak, *items):
    s = shape_of(items)
    rows = [r for r in metrics_lines(os.path.join(d, "run", "metrics.jsonl")) if "step_seconds" in r]
    timed = [r for r in rows if r.get("step", 0) > s["warmup"]]
    fpt = flops_per_token(s)
    extra = {"shape": s, "parameters": params(s), "flops_per_token": fpt, "peak_tflops": float(peak),
             **startup_facts(log)}
    if int(rc) != 0 or not timed:
        extra["reason"] = f"shardft exited {rc}, {len(timed)} timed steps: " + tail(log, 8).strip()[-800:]
        stage_result(out, "failed", seconds, **extra)
        return 0
    step = statistics.median(r["step_seconds"] for r in timed)
    tps = s["batch"] * s["seq"] / step
    extra.update({"framework": "shardft", "timed_steps": len(timed), "step_ms": step * 1e3, "tokens_per_second": tps,
                  "mfu": fpt * tps / (float(peak) * 1e12) if float(peak) > 0 else None,
                  "mfu_logged_median": statistics.median(r.get("mfu", 0.0) for r in timed),
                  "loss_first_last": [rows[0].get("loss"), rows[-1].get("loss")],
                  "peak_host_rss_bytes": max(r.get("peak_memory_bytes", 0) for r in rows)})
    peak_mib, base_mib = gpu_peak_mib(os.path.join(d, "gpu_memory_mib.txt"))
    if peak_mib is not None:
        extra["peak_gpu_memory_mib"] = peak_mib
        extra["gpu_memory_before_mib"] = base_mib
    stage_result(out, "ok", seconds, **extra)
    return 0


def cmd_torch_result(raw, log, out, seconds, rc):
    data = read_json(raw)
    if int(rc) != 0 or not data:
        stage_result(out, "failed", seconds, reason=f"torch_bench.py exited {rc}: " + tail(log, 8).strip()[-800:])
    else:
        stage_result(out, "ok", seconds, **data)
    return 0


# ---- report ------------------------------------------------------------------------------------

def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def fmt(v, spec=".3g"):
    if v is None:
        return "-"
    if isinstance(v, (int, float)):
        return format(v, spec)
    return str(v)


def cmd_report(state, out_md, mode, kit, root):
    R = {os.path.basename(p)[:-5]: read_json(p, {}) for p in glob.glob(os.path.join(state, "results", "*.json"))}
    gpu = sh(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]) if shutil.which("nvidia-smi") else ""
    nvcc = re.search(r"release [^\n]*", sh(["nvcc", "--version"])) if shutil.which("nvcc") else None
    L = [f"# shardft GPU kit validation ({'GPU' if mode == 'cuda' else '--no-gpu: CPU, OpenMP Kokkos'})", "",
         f"- when: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; host: {platform.node()}, {os.cpu_count()} cores, "
         f"{sh(['sh', '-c', '. /etc/os-release && echo $PRETTY_NAME'])}",
         f"- GPU: {gpu or 'none'}; nvcc: {nvcc.group(0) if nvcc else 'none'}; {sh(['cmake', '--version']).splitlines()[0] if shutil.which('cmake') else 'no cmake'}",
         f"- kit: {kit} ({fmt(R.get('unpack', {}).get('kit_bytes', 0) / 1048576, '.1f')} MiB, "
         f"{R.get('unpack', {}).get('debs', '?')} debs, {R.get('unpack', {}).get('kokkos', '?')}); "
         f"unpacked to {fmt(R.get('unpack', {}).get('prefix_bytes', 0) / 1048576, '.0f')} MiB; "
         f"{R.get('unpack', {}).get('mpi', '')}", "",
         "| stage | status | seconds | note |", "| --- | --- | --- | --- |"]
    for st in ("unpack", "build", "test", "train", "bench", "torch"):
        r = R.get(st)
        if not r:
            L.append(f"| {st} | not run | | |")
            continue
        note = r.get("reason", r.get("note", ""))
        L.append(f"| {st} | {r['status']} | {fmt(r.get('seconds'), '.0f')} | {note.replace('|', '/').replace(chr(10), ' ')[:300]} |")

    kc = R.get("kit_check")
    if kc:
        L += ["", "## The build took its dependencies from the kit", ""]
        h = kc.get("headers", {})
        L.append(f"- headers compiled: {h.get('total')}: {h.get('kit')} from the kit ("
                 f"{', '.join(f'{p} {n}' for p, n in (h.get('kit_packages') or {}).items())}); {h.get('project')} "
                 f"project and Kokkos; {h.get('host')} host (compiler, libc, CUDA)")
        groups = {}
        for c in kc.get("cmake", []):
            m = re.match(r"(MPIEXEC|MPI|HDF5|CBLAS|BLAS|ICU_UC|PCRE2|ZLIB|PKG_CONFIG|GTest|benchmark|nlohmann_json|"
                         r"yaml-cpp|Kokkos|CUDAToolkit|NCCL)", c["key"])
            groups.setdefault(m.group(1) if m else c["key"], set()).add(c["where"])
        L.append("- CMake found (paths in CMakeCache.txt): " + "; ".join(
            f"{k}: {', '.join(sorted(w))}" for k, w in sorted(groups.items())))
        for b, libs in kc.get("ldd", {}).items():
            inkit = sorted({x.get("package") or "?" for x in libs if x["where"] == "kit"})
            host = [x["lib"] for x in libs if x["where"] != "kit"]
            rp = kc.get("rpath", {}).get(b) or {}
            L.append(f"- `ldd {b}` with no LD_LIBRARY_PATH ({rp.get('kind', 'no')} with {rp.get('kit_dirs', 0)} kit "
                     f"folders): {sum(x['where'] == 'kit' for x in libs)} libraries from the kit's "
                     f"{', '.join(inkit)}; from the host: {', '.join(host)}")
        L.append(f"- violations (a system copy used where the kit has the file): {len(kc.get('violations', []))}")
        L += [f"  - {v}" for v in kc.get("violations", [])[:20]]

    t = R.get("test")
    if t:
        L += ["", "## Unit tests", "", f"{t.get('tests')} tests: {t.get('passed')} passed, {t.get('failed')} failed, "
              f"{t.get('skipped')} skipped ({fmt(t.get('seconds'), '.0f')} s)."]
        if t.get("note"):
            L.append(f"Note: {t['note']}.")
        if t.get("failures"):
            L.append("Failed: " + ", ".join(t["failures"]))
        for reason, names in (t.get("skip_reasons") or {}).items():
            L.append(f"- skipped ({len(names)}): {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}: {reason[:300]}")

    tr = R.get("train")
    if tr:
        L += ["", "## Default recipe (jobs/recipes/default.yaml)", "",
              f"{tr.get('ranks')} rank(s), {tr.get('steps')} steps in {fmt(tr.get('train_runtime'), '.1f')} s "
              f"(stage {fmt(tr.get('seconds'), '.0f')} s): held-out exact match **{fmt(tr.get('eval_exact_match'), '.3f')}** "
              f"(bar 0.90), eval loss {fmt(tr.get('eval_loss'), '.4f')}, train loss {fmt(tr.get('train_loss'), '.4f')}."]

    b, tb = R.get("bench"), R.get("torch")
    if b or tb:
        s = (b or {}).get("shape") or {}
        L += ["", "## Benchmark: bf16 training step, side by side", ""]
        if s:
            L.append(f"Shape {s.get('name')}: hidden {s.get('hidden')}, {s.get('layers')} layers, {s.get('heads')}/"
                     f"{s.get('kv_heads')} heads, intermediate {s.get('inter')}, vocab {s.get('vocab')} (tied), "
                     f"{fmt(b.get('parameters', 0) / 1e9, '.3f')} B parameters; batch {s.get('batch')} x {s.get('seq')} "
                     f"tokens; median of {s.get('steps')} steps after {s.get('warmup')} warm-up. " +
                     (f"MFU = {fmt(b.get('flops_per_token'), '.4g')} FLOP/token (train/mfu.cpp: 6 x matmul weights + "
                      f"12 L d T attention) x tokens/s / {fmt(b.get('peak_tflops'))} TFLOP/s."
                      if b.get("peak_tflops") else
                      "No GPU peak to measure MFU against: the logged MFU is shardft's, against the fp32 GEMM rate it "
                      f"measures at start ({b.get('mfu_basis', '?')})."))
            if b.get("build"):
                L.append(f"shardft build: {b['build']}.")
        L += ["", "| framework | step ms | tokens/s | MFU | peak GPU memory | peak host RSS | notes |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
        for name, r in (("shardft", b), ("PyTorch", tb)):
            if not r:
                continue
            if r.get("status") != "ok":
                L.append(f"| {name} | - | - | - | - | - | {r.get('status')}: {str(r.get('reason', ''))[:300]} |")
                continue
            gpu_mem = r.get("peak_gpu_memory_mib")
            gpu_txt = f"{gpu_mem} MiB (nvidia-smi, before: {r.get('gpu_memory_before_mib')})" if gpu_mem is not None else "-"
            if name == "PyTorch" and r.get("max_memory_allocated_bytes") is not None:
                gpu_txt = (f"{r['max_memory_allocated_bytes'] / 2**20:.0f} MiB allocated, "
                           f"{r.get('max_memory_reserved_bytes', 0) / 2**20:.0f} MiB reserved")
            rss = r.get("peak_host_rss_bytes")
            loss = " -> ".join(fmt(x, ".3f") for x in r.get("loss_first_last") or [])
            if name == "shardft":
                notes = f"logged MFU {fmt(r.get('mfu_logged_median'), '.3f')}; loss {loss}"
            else:
                notes = (f"{r.get('framework', '')}; {r.get('device', '')}; {r.get('precision', '')}; "
                         f"{r.get('optimizer', '')}; attention {r.get('attn_implementation')}"
                         f"{' (' + r['attn_fallback'] + ')' if r.get('attn_fallback') else ''}; loss {loss}")
            L.append(f"| {name} | {fmt(r.get('step_ms'), '.1f')} | {fmt(r.get('tokens_per_second'), '.0f')} | "
                     f"{fmt(r.get('mfu'), '.3f')} | {gpu_txt} | {fmt(rss / 2**20, '.0f') + ' MiB' if rss else '-'} | {notes} |")
    L += ["", f"Logs: {os.path.join(state, 'logs')}; results: {os.path.join(state, 'results')}.", ""]
    os.makedirs(os.path.dirname(out_md), exist_ok=True)
    with open(out_md, "w") as f:
        f.write("\n".join(L))
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[1], argv[2:]
    if cmd == "result":
        return stage_result(args[0], args[1], args[2], **kv_args(args[3:])) or 0
    table = {"kit-check": cmd_kit_check, "gtest": cmd_gtest, "train": cmd_train, "bench-recipe": cmd_bench_recipe,
             "bench-result": cmd_bench_result, "torch-result": cmd_torch_result, "report": cmd_report}
    if cmd not in table:
        print(f"validate_util.py: unknown command {cmd}", file=sys.stderr)
        return 2
    return table[cmd](*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
