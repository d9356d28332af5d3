#!/usr/bin/env python3
"""interop_gguf.py - dsv4q's GGUF reader and GGML decoders vs gguf-py (PyPI
`gguf`, llama.cpp's own Python package), and the oracle on a GGUF vs the
same weights in safetensors.

Owns two proofs:
 1. Decoders. For each GGML type dsv4q decodes (F32, F16, BF16, Q4_0, Q4_1,
    Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, TQ1_0, TQ2_0, IQ4_NL,
    IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, MXFP4,
    NVFP4) this writes, with gguf-py's GGUFWriter, random blocks plus edge
    blocks (F16 scales 0, -0, the smallest and largest subnormal, the
    largest normal; codes all 0x00 and all 0xFF; every MXFP4 exponent byte
    and every NVFP4 scale byte 0..255) as tensor q.T, and
    gguf.quants.dequantize of the same bytes as want.T (F32). The C test
    (build/tests/test_gguf, test_interop) opens the file with dsv4q's reader
    and requires every value bit for bit. The values on the Python side are
    never computed by dsv4q, so this is an independent check.
 2. Binding. `dsv4q synth --config tiny-bf16` -> scripts/st2gguf.py (exact
    copy into a deepseek4 GGUF) -> `dsv4q run` on both at f64 and f32: the
    logits files must be byte-identical. An FP8 checkpoint (`tiny`) must be
    refused by st2gguf (GGUF has no E4M3 type).

Needs: python3 with numpy and gguf (pip install numpy gguf==0.19.0), and
build/dsv4q + build/tests/test_gguf. Exit 0 = both proofs hold.
usage: python3 tests/interop_gguf.py [N_RANDOM_BLOCKS_PER_TYPE]
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the build the tests were built into (build, or build/asan: run_all.sh)
BUILD = os.environ.get("DSV4Q_TEST_BUILD", "build")
BIN = os.path.join(ROOT, BUILD, "dsv4q")
TEST = os.path.join(ROOT, BUILD, "tests", "test_gguf")

# IQ1_M has no F16 field: its d is the top nibbles of the four u16 scale
# words at bytes 48..55 (bits 4w..4w+3 of d in word w); put_f16 scatters it
IQ1M_D = -1
# byte offsets of the F16 scale fields in each block (ggml-common.h structs)
F16_FIELDS = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q2_K: [80, 82], T.Q3_K: [108],
              T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208], T.TQ1_0: [52], T.TQ2_0: [64], T.IQ4_NL: [0], T.IQ4_XS: [0],
              T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0],
              T.IQ1_M: [IQ1M_D], T.MXFP4: [], T.NVFP4: []}
EDGE_F16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x7BFF, 0xFBFF, 0x3C00, 0x0400]


def finite_f16(rng, n):
    """Random F16 bit patterns without inf/NaN (exponent 31 cleared)."""
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    bad = (h & 0x7C00) == 0x7C00
    h[bad] &= 0xBFFF
    return h


def put_f16(blocks, off, h):
    """Store F16 codes h (one per row of blocks) in field `off` (IQ1M_D:
    IQ1_M's scattered d)."""
    h = np.asarray(h, dtype=np.uint16).reshape(-1)
    if off == IQ1M_D:
        for w in range(4):
            nib = ((h >> (4 * w)) & 0xF).astype(np.uint8)
            blocks[:, 49 + 2 * w] = (blocks[:, 49 + 2 * w] & 0x0F) | (nib << 4)
    else:
        blocks[:, off:off + 2] = h.view(np.uint8).reshape(-1, 2)


def blocks_for(qt, rng, n):
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    if qt == T.F32:
        v = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
        v = np.concatenate([v, np.array([0, 0x80000000, 1, 0x007FFFFF, 0x7F7FFFFF, 0x7F800000, 0xFF800000],
                                        dtype=np.uint32)])
        return v.view(np.uint8).reshape(-1, 4)
    if qt == T.F16:
        h = np.concatenate([finite_f16(rng, n), np.array(EDGE_F16 + [0x7C00, 0xFC00], dtype=np.uint16)])
        return h.view(np.uint8).reshape(-1, 2)
    if qt == T.BF16:
        h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
        h = np.concatenate([h, np.array([0, 0x8000, 1, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0], dtype=np.uint16)])
        return h.view(np.uint8).reshape(-1, 2)
    b = rng.integers(0, 256, size=(n, ts), dtype=np.uint16).astype(np.uint8)
    edges = []
    for fill in (0x00, 0xFF):
        for sc in EDGE_F16:
            e = np.full(ts, fill, dtype=np.uint8)
            for off in F16_FIELDS[qt]:
                put_f16(e.reshape(1, -1), off, [sc])
            edges.append(e)
    if qt == T.MXFP4:
        for ex in range(256):   # every E8M0 exponent, random codes
            e = rng.integers(0, 256, size=ts, dtype=np.uint16).astype(np.uint8)
            e[0] = ex
            edges.append(e)
    if qt == T.NVFP4:
        for sc in range(256):   # every UE4M3 scale byte in each of the 4 slots
            e = rng.integers(0, 256, size=ts, dtype=np.uint16).astype(np.uint8)
            e[:4] = [sc, (sc + 64) % 256, (sc + 128) % 256, (sc + 192) % 256]
            edges.append(e)
    b = np.concatenate([b, np.stack(edges)])
    for off in F16_FIELDS[qt]:   # random blocks: finite scales only
        put_f16(b[:n], off, finite_f16(rng, n))
    return b


def decoders(tmp, n):
    rng = np.random.default_rng(20261201)
    path = os.path.join(tmp, "from_py.gguf")
    w = gguf.GGUFWriter(path, "dsv4q-interop")
    types = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K,
             T.TQ1_0, T.TQ2_0, T.IQ4_NL, T.IQ4_XS, T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ3_XXS, T.IQ3_S,
             T.IQ1_S, T.IQ1_M, T.MXFP4, T.NVFP4]
    counts = {}
    for qt in types:
        raw = blocks_for(qt, rng, n)
        with np.errstate(all="ignore"):
            want = gguf.quants.dequantize(raw, qt).astype(np.float32)
        w.add_tensor("q." + qt.name, raw, raw_dtype=qt)
        w.add_tensor("want." + qt.name, np.ascontiguousarray(want.reshape(raw.shape[0], -1)))
        counts[qt.name] = raw.shape[0]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = subprocess.run([TEST], env={**os.environ, "DSV4Q_INTEROP_DIR": tmp}, capture_output=True, text=True)
    out = r.stdout + r.stderr
    seen = {t: (nb, nd) for t, nb, nd in re.findall(r"interop (\w+): (\d+) blocks, \d+ values, (\d+) differences", out)}
    ok = r.returncode == 0 and "[  PASSED  ] 17 test(s)" in out
    for name, nb in counts.items():
        got, nd = seen.get(name, (None, None))
        print(f"decoder {name:8s}: {nb} blocks written by gguf-py, "
              + (f"{got} compared bit for bit, {nd} differences" if got else "NOT CONFIRMED"))
        ok = ok and got is not None and int(got) == nb and int(nd) == 0
    if not ok:
        print(out[-4000:])
    return ok


def run(model, width, out):
    cmd = [BIN, "run", "--model", model, "--prompt-len", "12", "--decode", "2", "--width", width,
           "--profile", "source", "--out", out, "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(" ".join(cmd), "->", r.returncode, r.stderr[-2000:])
    return r.returncode == 0


def binding(tmp):
    st = os.path.join(tmp, "tiny-bf16")
    gg = os.path.join(tmp, "tiny-bf16.gguf")
    subprocess.run([BIN, "synth", "--config", "tiny-bf16", "--out", st], check=True, capture_output=True)
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "st2gguf.py"), st, gg], check=True)
    g32 = os.path.join(tmp, "tiny-f32.gguf")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "st2gguf.py"), st, g32, "--f32"], check=True)
    ok = True
    for width in ("f64", "f32"):
        a = os.path.join(tmp, f"st_{width}.safetensors")
        if not run(st, width, a):
            return False
        # BF16 copy, and the same values widened to F32 (F32 wo_a: its groups
        # are split at 4 bytes per element, oracle/model.c)
        for tag, g in (("BF16", gg), ("F32", g32)):
            b = os.path.join(tmp, f"gg_{tag}_{width}.safetensors")
            if not run(g, width, b):
                return False
            same = open(a, "rb").read() == open(b, "rb").read()
            print(f"binding: dsv4q run {width} on tiny-bf16 safetensors vs its {tag} GGUF: "
                  + ("logits byte-identical" if same else "DIFFERENT"))
            ok = ok and same
    fp8 = os.path.join(tmp, "tiny")
    subprocess.run([BIN, "synth", "--config", "tiny", "--out", fp8], check=True, capture_output=True)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "st2gguf.py"), fp8, fp8 + ".gguf"],
                       capture_output=True, text=True)
    refused = r.returncode != 0 and "has dtype F8_" in r.stderr
    print("binding: st2gguf refuses the FP8 checkpoint:", "yes" if refused else "NO: " + r.stderr[-300:])
    return ok and refused


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
    with tempfile.TemporaryDirectory(prefix="dsv4q-gguf-") as tmp:
        ok = decoders(tmp, n)
        ok = binding(tmp) and ok
    print("interop_gguf:", "ok" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
