#!/usr/bin/env python3
"""interop_gguf_f16.py - the F16 route: scripts/st2gguf.py --f16 and the
oracle on the F16 GGUF it writes.

Proofs (each against numpy / gguf-py, never against dsv4q's own decoder):
 1. File. `dsv4q synth --config tiny-bf16` -> st2gguf --f16. Read back with
    gguf-py's GGUFReader: every 2-D+ BF16 tensor of the checkpoint is F16
    and holds numpy's float16 rounding of its BF16 values, bit for bit;
    every 1-D BF16 tensor is F32 holding the BF16 values (exact widening);
    every F32 tensor is unchanged; st2gguf's "N of M values rounded" line
    matches numpy's count.
 2. Decode. `dsv4q weight --out` of one F16 tensor at f64 equals numpy's
    float16 values widened.
 3. Binding. A second GGUF is written by the same script with each F16
    tensor's values stored as F32 instead (st2gguf.to_f16 wrapped to widen
    its result): `dsv4q run` (exact profile, f64 and f32) on the F16 GGUF
    and on that F32 GGUF give byte-identical logits, i.e. the oracle binds
    an F16 GGUF as exactly those values.
 4. scripts/llamacpp/quantize.py's F16 target is llama.h's
    LLAMA_FTYPE_MOSTLY_F16 = 1.

Needs: python3 with numpy and gguf, build/dsv4q. Exit 0 = all hold.
usage: python3 tests/interop_gguf_f16.py
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("DSV4Q_TEST_BUILD", "build")
BIN = os.path.join(ROOT, BUILD, "dsv4q")


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


st2gguf = load(os.path.join(ROOT, "scripts", "st2gguf.py"), "st2gguf")


def check(ok, what, fails):
    print(("  ok   " if ok else "  FAIL ") + what)
    if not ok:
        fails.append(what)


def gguf_name(ref):
    if ref in st2gguf.GLOBAL:
        return st2gguf.GLOBAL[ref]
    m = re.match(r"layers\.(\d+)\.(.*)$", ref)
    if m and m.group(2) in st2gguf.LAYER:
        return f"blk.{m.group(1)}.{st2gguf.LAYER[m.group(2)]}"
    return None   # experts (stacked) and MTP layers: not compared one by one here


def file_proof(st, g16, log, fails):
    src = st2gguf.read_safetensors(st)
    r = gguf.GGUFReader(g16)
    tens = {t.name: t for t in r.tensors}
    T = gguf.GGMLQuantizationType
    n16 = nf32 = rounded = total = 0
    bad = []
    for ref, (dt, arr) in src.items():
        g = gguf_name(ref)
        if g is None or g not in tens:
            continue
        t = tens[g]
        data = np.asarray(t.data).reshape(arr.shape)
        if dt == "BF16":
            x = (arr.astype(np.uint32) << 16).view(np.float32)
            if arr.ndim >= 2:
                want = x.astype(np.float16)
                ok = t.tensor_type == T.F16 and np.array_equal(data.view(np.uint16), want.view(np.uint16))
                n16 += 1
            else:
                ok = t.tensor_type == T.F32 and np.array_equal(data.view(np.uint32), x.view(np.uint32))
                nf32 += 1
        elif dt == "F32":
            ok = t.tensor_type == T.F32 and np.array_equal(data.view(np.uint32), arr.view(np.uint32))
            nf32 += 1
        else:
            ok = True
        if not ok:
            bad.append(f"{ref} -> {g} ({t.tensor_type.name})")
    # the rounded count over what st2gguf writes: mapped tensors and the routed experts of the bound layers
    nl = json.load(open(os.path.join(st, "config.json")))["n_layers"]
    for ref, (dt, arr) in src.items():
        m = re.match(r"layers\.(\d+)\.ffn\.experts\.\d+\.w[123]\.weight$", ref)
        if dt != "BF16" or arr.ndim < 2 or not (gguf_name(ref) in tens or (m and int(m.group(1)) < nl)):
            continue
        x = (arr.astype(np.uint32) << 16).view(np.float32)
        rounded += int(np.count_nonzero(x.astype(np.float16).astype(np.float32) != x))
        total += x.size
    check(not bad and n16 > 0 and nf32 > 0,
          f"file: {n16} BF16 matrices are F16 = numpy float16(BF16), {nf32} F32 (1-D BF16 widened, F32 kept)" +
          (f"; wrong: {bad[:3]}" if bad else ""), fails)
    said = re.search(r"--f16: (\d+) of (\d+) values rounded", log)
    check(said is not None and (int(said.group(1)), int(said.group(2))) == (rounded, total),
          f"file: st2gguf reports {said.group(0) if said else 'nothing'}; numpy counts {rounded} of {total}", fails)
    return tens, src


def decode_proof(tmp, g16, tens, fails):
    name = "blk.0.attn_q_a.weight"
    t = tens[name]
    out = os.path.join(tmp, "w.f64")
    r = subprocess.run([BIN, "weight", "--model", g16, "--tensor", name, "--out", out], capture_output=True, text=True)
    got = np.fromfile(out, "<f8") if r.returncode == 0 else None
    want = np.asarray(t.data).astype(np.float64).ravel()
    check(got is not None and got.shape == want.shape and np.array_equal(got, want),
          f"decode: dsv4q weight {name} (F16, {want.size} values) = numpy's float16 widened" +
          ("" if r.returncode == 0 else ": " + r.stderr[-300:]), fails)


def write_widened(st, dst):
    """st2gguf --f16 with each F16 tensor's values stored as F32 instead."""
    orig = st2gguf.to_f16
    st2gguf.to_f16 = lambda name, dt, arr: orig(name, dt, arr).astype(np.float32)
    argv = sys.argv
    try:
        sys.argv = ["st2gguf.py", st, dst, "--f16"]
        st2gguf.main()
    finally:
        st2gguf.to_f16, sys.argv = orig, argv


def run(model, width, out):
    # one thread: the result does not depend on it, and OpenMP's spinning costs seconds on a loaded machine
    cmd = [BIN, "run", "--model", model, "--prompt-len", "12", "--decode", "2", "--width", width,
           "--profile", "exact", "--out", out, "--quiet", "--threads", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(" ".join(cmd), "->", r.returncode, r.stderr[-2000:])
    return r.returncode == 0


def main():
    fails = []
    with tempfile.TemporaryDirectory(prefix="dsv4q-gguf-f16-") as tmp:
        st = os.path.join(tmp, "tiny-bf16")
        g16 = os.path.join(tmp, "tiny-f16.gguf")
        subprocess.run([BIN, "synth", "--config", "tiny-bf16", "--out", st], check=True, capture_output=True)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "st2gguf.py"), st, g16, "--f16"],
                           capture_output=True, text=True)
        check(r.returncode == 0, "st2gguf --f16 writes the GGUF" + ("" if r.returncode == 0 else ": " + r.stderr[-300:]),
              fails)
        if r.returncode == 0:
            tens, _ = file_proof(st, g16, r.stderr, fails)
            decode_proof(tmp, g16, tens, fails)
            gw = os.path.join(tmp, "tiny-f16-as-f32.gguf")
            write_widened(st, gw)
            for width in ("f64", "f32"):
                a, b = os.path.join(tmp, f"a_{width}.st"), os.path.join(tmp, f"b_{width}.st")
                same = run(g16, width, a) and run(gw, width, b) and open(a, "rb").read() == open(b, "rb").read()
                check(same, f"binding: dsv4q run {width} (exact) on the F16 GGUF = on the same values in F32", fails)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "st2gguf.py"), st, g16, "--f16", "--f32"],
                           capture_output=True, text=True)
        check(r.returncode != 0, "st2gguf refuses --f16 with --f32", fails)
    q = load(os.path.join(ROOT, "scripts", "llamacpp", "quantize.py"), "quantize")
    check(q.FTYPES.get("F16") == 1, "quantize.py F16 = LLAMA_FTYPE_MOSTLY_F16 (1)", fails)
    print("interop_gguf_f16:", "ok" if not fails else f"FAILED ({len(fails)})")
    sys.exit(0 if not fails else 1)


if __name__ == "__main__":
    main()
