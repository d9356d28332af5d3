#!/usr/bin/env python3
"""wm_discrimination.py - how well the whole-model per-stage verdict
separates correct backends from defective ones (issue 19 item 5).

Runs `dsv4q qualify --whole-model --seeds A-B --json` for every backend
given (default: oracle-f32, cpu-ref, the CUDA CPU-emulation plugin when
built, the test plugin that skips the FP8 activation simulation, and every
built-in mutant) and prints, as Markdown:
  1. per backend: runs passed, and the stage kinds that failed (logit gate
     and per-stage verdict apart);
  2. per stage kind: the worst value/bound of the LEGITIMATE backends
     (max over backends, seeds, layers and gated metrics) against, for each
     defective backend failing there, its smallest per-seed worst
     value/bound (the seed where it is hardest to see).
A value/bound below 1 passes. Usage:
  scripts/wm_discrimination.py [--dsv4q build/dsv4q] [--model DIR] [--gates FILE] [--seeds 1-8]
                               [--out DIR [--reuse]] [BACKEND ...]
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

LEGIT = ["oracle-f32", "cpu-ref", "build/plugins/libdsv4q_cuda_emu.so"]
DEFECT_PLUGINS = ["build/plugins/no_act_fp8.so"]


def mutants():
    text = open("backends/cpuref/kernels.h").read()
    return ["mutant:" + m for m in re.findall(r"X\([A-Z][A-Z_0-9]+, ([a-z][a-z_0-9]+), \"", text)]


def ratio(metric):
    if not metric.get("gated"):
        return None
    v, b = metric["value"], metric["bound"]
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return math.inf
    if b is None:
        return None
    if b > 0:
        return v / b
    return 0.0 if metric.get("pass") else math.inf


def stage_kind(key):
    return key.split(".", 1)[1]


def worst_by_kind(run):
    """{stage kind: worst value/bound over layers and gated metrics}."""
    out = {}
    for st in run.get("stages", []):
        k = stage_kind(st["stage"])
        for m in st.get("metrics", {}).values():
            r = ratio(m)
            if r is not None and r > out.get(k, -1):
                out[k] = r
    return out


def run_backend(dsv4q, model, gates, seeds, backend, outdir, reuse):
    name = re.sub(r"[^A-Za-z0-9]+", "_", backend)
    js = os.path.join(outdir, name + ".json")
    if reuse and os.path.exists(js):
        runs = json.load(open(js))
        return runs if isinstance(runs, list) else [runs]
    cmd = [dsv4q, "qualify", "--whole-model", "--backend", backend, "--seeds", seeds, "--json", js,
           "--db", os.path.join(outdir, "receipts.db"), "-q"]
    if model:
        cmd += ["--model", model]
    if gates:
        cmd += ["--gates", gates]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode == 2 or not os.path.exists(js):
        sys.exit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    runs = json.load(open(js))
    return runs if isinstance(runs, list) else [runs]


def fmt(r):
    if r is None:
        return "-"
    if math.isinf(r):
        return "inf"
    return f"{r:.3g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsv4q", default="build/dsv4q")
    ap.add_argument("--model", default=None)
    ap.add_argument("--gates", default=None)
    ap.add_argument("--seeds", default="1-8")
    ap.add_argument("--out", default=None)
    ap.add_argument("--reuse", action="store_true", help="reuse the JSON already in --out (same seeds and build)")
    ap.add_argument("backends", nargs="*")
    a = ap.parse_args()
    outdir = a.out or tempfile.mkdtemp(prefix="dsv4q-wmdisc-")
    os.makedirs(outdir, exist_ok=True)
    legit = [b for b in LEGIT if ":" in b or "/" not in b or os.path.exists(b)]
    defect = [b for b in DEFECT_PLUGINS if os.path.exists(b)] + mutants()
    backends = a.backends or legit + defect
    res = {b: run_backend(a.dsv4q, a.model, a.gates, a.seeds, b, outdir, a.reuse) for b in backends}

    print(f"Whole-model verdicts, token seeds {a.seeds} (`{a.dsv4q} qualify --whole-model --seeds {a.seeds}`):\n")
    print("| backend | runs pass | logit gate fails | per-stage fails | stage kinds failing (seeds) |")
    print("|---|---|---|---|---|")
    for b, runs in res.items():
        npass = sum(r.get("verdict") == "pass" for r in runs)
        lfail = sum(not (r.get("logit_nrms_pass") and r.get("greedy_pass") and r.get("nonfinite") == 0) for r in runs)
        sfail = sum(not r.get("stages_pass") for r in runs)
        kinds = {}
        for r in runs:
            for st in r.get("stages", []):
                if st["verdict"] == "FAIL":
                    kinds.setdefault(stage_kind(st["stage"]), set()).add(id(r))
        kdesc = ", ".join(f"{k} ({len(v)})" for k, v in sorted(kinds.items())) or "-"
        print(f"| {b} | {npass}/{len(runs)} | {lfail} | {sfail} | {kdesc} |")

    legit_set = [b for b in backends if b in LEGIT]
    kinds = []
    for runs in res.values():
        for r in runs:
            for st in r.get("stages", []):
                k = stage_kind(st["stage"])
                if k not in kinds:
                    kinds.append(k)
    print("\nPer stage kind: worst legitimate value/bound (max over "
          f"{', '.join(legit_set)}; seeds, layers, gated metrics) against each defective backend that fails "
          "there, at its weakest seed (min over seeds of its worst value/bound):\n")
    print("| stage | worst legitimate | defective backends failing here: weakest-seed value/bound |")
    print("|---|---|---|")
    for k in kinds:
        wl = max((worst_by_kind(r).get(k, -1) for b in legit_set for r in res[b]), default=None)
        cells = []
        for b in backends:
            if b in legit_set:
                continue
            per = [worst_by_kind(r).get(k) for r in res[b]]
            if any(p is not None and p > 1 for p in per):
                cells.append(f"{b} {fmt(min(p for p in per if p is not None))}")
        print(f"| {k} | {fmt(wl)} | {'; '.join(cells) or '-'} |")
    print(f"\n(JSON per backend in {outdir})")


if __name__ == "__main__":
    main()
