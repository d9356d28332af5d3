#!/usr/bin/env python3
"""interop_kvcache.py - `dsv4q cache decode` against an encoder written here.

Owns: the byte-level check of the cache layout catalog (oracle/kvlayout.c,
docs/caches.md). For every layout an independent numpy encoder places
random stored codes at the offsets the engine's source gives (the layout
description in docs/caches.md, not dsv4q's code), and computes each decoded
value from the bit layout of its format (E4M3fn, BF16, UE8M0, E2M1, F16,
int8 x F16): dsv4q's values and scales must agree bit for bit (binary64
patterns; a NaN code must decode to NaN). Then hostile inputs: a cache one
byte short of whole blocks, an empty file, an unknown layout, a row layout
without its width, --slots beyond the cache: exit 2 with one line naming
the file or layout and the expected size, and no output file left behind.

Needs: python3 with numpy (make pydeps) and the built build/dsv4q.
Usage, from the repository root:  python3 tests/interop_kvcache.py [DSV4Q]
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

DSV4Q = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("DSV4Q_TEST_BUILD", "build"), "dsv4q")
RNG = np.random.default_rng(25)
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def e4m3(c):
    """E4M3fn from its bits: bias 7, no infinity, S.1111.111 is NaN."""
    s = -1.0 if c & 0x80 else 1.0
    e, m = (c >> 3) & 15, c & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return s * (m / 8.0) * 2.0 ** -6
    return s * (1 + m / 8.0) * 2.0 ** (e - 7)


def ue8m0(b):
    return math.nan if b == 0xFF else 2.0 ** (int(b) - 127)


def bf16(code):
    return float(np.array([int(code) << 16], dtype=np.uint32).view(np.float32)[0])


def f16(code):
    return float(np.array([int(code)], dtype=np.uint16).view(np.float16)[0])


def e2m1(n):
    return (-1.0 if n & 8 else 1.0) * E2M1[n & 7]


def planar(block, data_b, scale_b, align, recs):
    """recs: per token (data bytes, scale bytes); blocks of `block` tokens:
    all data, then all scales, zero padding to a multiple of align."""
    raw = block * (data_b + scale_b)
    stride = -(-raw // align) * align
    nblk = -(-len(recs) // block)
    buf = bytearray(nblk * stride)
    for t, (d, s) in enumerate(recs):
        base = (t // block) * stride
        p = t % block
        buf[base + p * data_b: base + (p + 1) * data_b] = d
        buf[base + block * data_b + p * scale_b: base + block * data_b + (p + 1) * scale_b] = s
    return bytes(buf), stride


def fp8_ds_mla(ntok, block):
    """vLLM fp8_ds_mla: 448 E4M3 + 64 BF16 (576 B) | 7 UE8M0 + 1 pad (8 B)."""
    recs, vals, scales = [], [], []
    for t in range(ntok):
        codes = RNG.integers(0, 256, 448, dtype=np.uint8)
        rope = RNG.integers(0, 0x10000, 64, dtype=np.uint32)
        rope[(rope & 0x7F80) == 0x7F80] &= 0xBFFF  # no inf/NaN rope codes
        sc = RNG.integers(0, 255, 7, dtype=np.uint8)
        d = codes.tobytes() + rope.astype("<u2").tobytes()
        recs.append((d, sc.tobytes() + b"\0"))
        vals.append([e4m3(int(codes[i])) * ue8m0(sc[i // 64]) for i in range(448)] + [bf16(r) for r in rope])
        scales.append([ue8m0(b) for b in sc])
    buf, stride = planar(block, 576, 8, 576, recs)
    fp8_ds_mla.recs = recs
    return buf, stride, vals, scales


def v41_fp8(ntok, block):
    """SGLang V4.1 FP8: 512 E4M3 (rope quantized too) | 16 UE8M0, one per 32 values; page pad 512."""
    recs, vals, scales = [], [], []
    for t in range(ntok):
        codes = RNG.integers(0, 256, 512, dtype=np.uint8)
        sc = RNG.integers(0, 255, 16, dtype=np.uint8)
        recs.append((codes.tobytes(), sc.tobytes()))
        vals.append([e4m3(int(codes[i])) * ue8m0(sc[i // 32]) for i in range(512)])
        scales.append([ue8m0(b) for b in sc])
    buf, stride = planar(block, 512, 16, 512, recs)
    return buf, stride, vals, scales


def v41_fp4(ntok, block):
    """SGLang V4.1 FP4: 512 E2M1, 256 B (even index low nibble) | 32 E4M3 scales, one per 16; page pad 256."""
    recs, vals, scales = [], [], []
    for t in range(ntok):
        packed = RNG.integers(0, 256, 256, dtype=np.uint8)
        sc = RNG.integers(0, 256, 32, dtype=np.uint8)
        recs.append((packed.tobytes(), sc.tobytes()))
        v = []
        for j in range(256):
            v += [e2m1(int(packed[j]) & 15), e2m1(int(packed[j]) >> 4)]
        vals.append([v[i] * e4m3(int(sc[i // 16])) for i in range(512)])
        scales.append([e4m3(int(b)) for b in sc])
    buf, stride = planar(block, 256, 32, 256, recs)
    return buf, stride, vals, scales


def fp8_index_k(ntok, block):
    """vLLM indexer K: 128 E4M3 | one little-endian binary32 scale."""
    recs, vals, scales = [], [], []
    for t in range(ntok):
        codes = RNG.integers(0, 256, 128, dtype=np.uint8)
        sc = np.float32(RNG.standard_normal() * 2.0 ** int(RNG.integers(-20, 5)))
        recs.append((codes.tobytes(), np.array([sc], dtype="<f4").tobytes()))
        vals.append([e4m3(int(c)) * float(sc) for c in codes])
        scales.append([float(sc)])
    buf, stride = planar(block, 128, 4, 1, recs)
    return buf, stride, vals, scales


def mxfp4_index_k(ntok, block):
    """vLLM MXFP4 indexer K: 64 B of E2M1 pairs (low nibble = even element) | 4 UE8M0."""
    recs, vals, scales = [], [], []
    for t in range(ntok):
        packed = RNG.integers(0, 256, 64, dtype=np.uint8)
        sc = RNG.integers(0, 255, 4, dtype=np.uint8)
        recs.append((packed.tobytes(), sc.tobytes()))
        v = []
        for j in range(64):
            v += [e2m1(int(packed[j]) & 15), e2m1(int(packed[j]) >> 4)]
        vals.append([v[i] * ue8m0(sc[i // 32]) for i in range(128)])
        scales.append([ue8m0(b) for b in sc])
    buf, stride = planar(block, 64, 4, 1, recs)
    return buf, stride, vals, scales


def llamacpp_f16(ntok, width):
    codes = RNG.integers(0, 0x10000, (ntok, width), dtype=np.uint32).astype(np.uint16)
    return codes.astype("<u2").tobytes(), [[f16(c) for c in row] for row in codes], None


def llamacpp_q8_0(ntok, width):
    """ggml Q8_0: per 32 elements one F16 d then 32 int8; value = d * q."""
    buf, vals, scales = bytearray(), [], []
    for t in range(ntok):
        v, s = [], []
        for b in range(width // 32):
            d = int(RNG.integers(0, 0x7C00)) | (0x8000 if RNG.integers(0, 2) else 0)  # finite F16
            q = RNG.integers(-128, 128, 32, dtype=np.int8)
            buf += np.array([d], dtype="<u2").tobytes() + q.tobytes()
            v += [f16(d) * int(x) for x in q]
            s.append(f16(d))
        vals.append(v)
        scales.append(s)
    return bytes(buf), vals, scales


def run(args, verb="decode"):
    return subprocess.run([DSV4Q, "cache", verb] + args, capture_output=True, text=True)


def compare_cli(tmp, vals, scales, block):
    """cache compare against the encoder's rows: the right bytes pass, the
    planted bugs are named (token-interleaved records, slot 0 overwritten)."""
    recs = fp8_ds_mla.recs
    ntok = len(recs)
    rv, rs = os.path.join(tmp, "ref.v"), os.path.join(tmp, "ref.s")
    np.array(vals[:ntok], dtype="<f8").tofile(rv)
    np.array(scales[:ntok], dtype="<f8").tofile(rs)
    good, stride = planar(block, 576, 8, 576, recs)
    inter = bytearray(len(good))
    for t, (d, sc) in enumerate(recs):
        inter[t * 584: t * 584 + 584] = d + sc
    slot0, _ = planar(block, 576, 8, 576, [recs[3]] + recs[1:])
    cases = ((good, 0, f"{ntok} slot(s) identical"), (bytes(inter), 1, "planar/interleaved swap"),
             (slot0, 1, "slot 0 overwritten: it holds token 3's row"))
    for k, (b, rc, want) in enumerate(cases):
        f = os.path.join(tmp, f"engine{k}.bin")
        open(f, "wb").write(b)
        r = run([f, "--layout", "vllm_fp8_ds_mla", "--block-size", str(block), "--ref", rv, "--ref-scale", rs],
                "compare")
        print("   ", r.stdout.strip()[:200]) if k else None
        if r.returncode != rc or want not in r.stdout or len(r.stdout.strip().splitlines()) != 1:
            sys.exit(f"FAIL compare case {k}: exit {r.returncode}: {r.stdout!r} {r.stderr!r}")
    open(rv, "ab").write(b"\0")
    r = run([f, "--layout", "vllm_fp8_ds_mla", "--block-size", str(block), "--ref", rv], "compare")
    if r.returncode != 2 or rv not in r.stderr or "multiple of 4096" not in r.stderr:
        sys.exit(f"FAIL compare with a ragged reference: exit {r.returncode}: {r.stderr!r}")
    print("  ok cache compare: identical bytes exit 0; an interleaved writer and a slot-0 overwrite named, exit 1")


def same_bits(got, want, what):
    want = np.array(want, dtype=np.float64).ravel()
    if got.shape != want.shape:
        sys.exit(f"FAIL {what}: {got.size} values, expected {want.size}")
    nan = np.isnan(want)
    if not (np.isnan(got) == nan).all() or not (got.view(np.uint64)[~nan] == want.view(np.uint64)[~nan]).all():
        i = int(np.flatnonzero((got.view(np.uint64) != want.view(np.uint64)) & ~(nan & np.isnan(got)))[0])
        sys.exit(f"FAIL {what}: element {i}: dsv4q {got[i]!r}, encoder {want[i]!r}")


def check(tmp, name, buf, vals, scales, extra):
    path = os.path.join(tmp, name + ".bin")
    open(path, "wb").write(buf)
    vo, so = os.path.join(tmp, name + ".v"), os.path.join(tmp, name + ".s")
    r = run([path, "--layout", name, "--out", vo] + (["--scale-out", so] if scales else []) + extra)
    if r.returncode != 0:
        sys.exit(f"FAIL {name}: exit {r.returncode}: {r.stderr}")
    same_bits(np.fromfile(vo, "<f8"), vals, name + " values")
    if scales:
        same_bits(np.fromfile(so, "<f8"), scales, name + " scales")
    # the text form carries the same numbers (%.17g round-trips)
    r = run([path, "--layout", name, "--slots", "1"] + extra)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("slot 0 val ")][0]
    same_bits(np.array([float(x) for x in line.split()[3:]]), vals[0], name + " text")
    print(f"  ok {name}: {len(vals)} slots, {len(buf)} B, bit for bit")
    return path


def hostile(tmp, path, name, extra, want_stride):
    """Exit 2, one line naming the file, the layout and the expected multiple; no output left."""
    short = os.path.join(tmp, name + ".short")
    open(short, "wb").write(open(path, "rb").read()[:-1])
    out = os.path.join(tmp, name + ".never")
    for f in (short, os.path.join(tmp, "empty.bin")):
        r = run([f, "--layout", name, "--out", out] + extra)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or f not in lines[0] or name not in lines[0] \
                or f"multiple of {want_stride} B" not in lines[0]:
            sys.exit(f"FAIL hostile {name} {f}: exit {r.returncode}: {r.stderr!r}")
        if os.path.exists(out):
            sys.exit(f"FAIL hostile {name}: {out} was written")
    print(f"  ok {name}: a cache that is not whole {want_stride} B blocks exits 2 naming file and layout")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        open(os.path.join(tmp, "empty.bin"), "wb").close()
        for block in (64, 5):
            buf, stride, v, s = fp8_ds_mla(2 * block - 1 if block == 5 else block, block)
            if block == 64 and stride != 37440:  # 64 * 584 = 37376, rounded up to 65 * 576
                sys.exit(f"FAIL fp8_ds_mla stride {stride}")
            # the cache is whole blocks; the trailing slot of the last block is zeros
            v += [[0.0] * 448 + [0.0] * 64] * (len(buf) // stride * block - len(v))
            s += [[2.0 ** -127] * 7] * (len(buf) // stride * block - len(s))
            p = check(tmp, "vllm_fp8_ds_mla", buf, v, s, ["--block-size", str(block)])
            hostile(tmp, p, "vllm_fp8_ds_mla", ["--block-size", str(block)], stride)
            if block == 5:
                compare_cli(tmp, v, s, block)
        buf, stride, v, s = fp8_ds_mla(8, 8)
        p = check(tmp, "sglang_v4_fp8", buf, v, s, ["--block-size", "8"])
        hostile(tmp, p, "sglang_v4_fp8", ["--block-size", "8"], 5184)  # 8 * 584 = 4672 -> 9 * 576
        buf, stride, v, s = v41_fp8(6, 3)
        p = check(tmp, "sglang_v41_fp8", buf, v, s, ["--block-size", "3"])
        hostile(tmp, p, "sglang_v41_fp8", ["--block-size", "3"], 2048)  # 3 * 528 = 1584 -> 4 * 512
        buf, stride, v, s = v41_fp4(6, 3)
        if len(v41_fp4(1, 1)[0]) != 512:  # one token: 288 B, padded to 2 * 256
            sys.exit("FAIL v41_fp4 page padding")
        p = check(tmp, "sglang_v41_fp4", buf, v, s, ["--block-size", "3"])
        hostile(tmp, p, "sglang_v41_fp4", ["--block-size", "3"], 1024)  # 3 * 288 = 864 -> 4 * 256
        buf, stride, v, s = fp8_index_k(16, 8)
        p = check(tmp, "vllm_fp8_index_k", buf, v, s, ["--block-size", "8"])
        hostile(tmp, p, "vllm_fp8_index_k", ["--block-size", "8"], 8 * 132)
        buf, stride, v, s = mxfp4_index_k(16, 8)
        p = check(tmp, "vllm_mxfp4_index_k", buf, v, s, ["--block-size", "8"])
        hostile(tmp, p, "vllm_mxfp4_index_k", ["--block-size", "8"], 8 * 68)
        buf, v, _ = llamacpp_f16(6, 96)
        p = check(tmp, "llamacpp_f16", buf, v, None, ["--width", "96"])
        hostile(tmp, p, "llamacpp_f16", ["--width", "96"], 192)
        buf, v, s = llamacpp_q8_0(6, 64)
        p = check(tmp, "llamacpp_q8_0", buf, v, s, ["--width", "64"])
        hostile(tmp, p, "llamacpp_q8_0", ["--width", "64"], 68)
        for args, want in (([p, "--layout", "nvfp4_ds_mla"], "unknown cache layout 'nvfp4_ds_mla'"),
                           ([p, "--layout", "llamacpp_q8_0"], "width 0"),
                           ([p, "--layout", "llamacpp_q8_0", "--width", "64", "--slots", "7"], "holds 6 slot(s)")):
            r = run(args)
            if r.returncode != 2 or len(r.stderr.strip().splitlines()) != 1 or want not in r.stderr:
                sys.exit(f"FAIL {args}: exit {r.returncode}: {r.stderr!r}")
        print("  ok unknown layout, missing width, --slots past the end: exit 2, one line")
    print("interop_kvcache: all layouts decode bit for bit as the encoder")


if __name__ == "__main__":
    main()
