#!/usr/bin/env python3
"""interop_ds4_session.py - `dsv4q cache ds4` against files written here.

Owns: the check of ds4's KV checkpoint reader (io/ds4_session.c). A writer
written from ds4's description (ds4.c ds4_session_save_payload and
ds4_kvstore.c ds4_kvstore_fill_header at commit 8d57664, as docs/caches.md
states it; not from dsv4q's code) lays out a small session: 13 u32 header
fields, token ids, logits, per-layer row counts, then per layer the raw
rows, compressed rows + compressor state (ratio != 0) and indexer rows +
state (ratio 4), ds4's fixed ratio schedule 0, 0, 4, 128, 4, ... Rows hold
F16 values in f32, as ds4's CPU path stores them. Checked:
 - the summary (per-layer ratio and row counts, "consistent", exit 0), bare
   payload and KVC file (header, text, trailer bytes) alike;
 - every part's rows through --layer/--part --out, bit for bit as written;
 - planted bugs: a compressed row missing (exit 1, the finding names the
   layer and tokens / ratio), a value that is not F16 (reported, exit 0), a
   NaN (exit 1);
 - hostile files: truncated, bad magic, KVC token count not the payload's,
   trailing bytes, a part the layer lacks: exit 2 with one line naming it.

Needs: python3 with numpy (make pydeps) and the built build/dsv4q.
Usage, from the repository root:  python3 tests/interop_ds4_session.py [DSV4Q]
"""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

DSV4Q = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("DSV4Q_TEST_BUILD", "build"), "dsv4q")
RNG = np.random.default_rng(30)
HD, IHD, VOCAB, NL, TOKENS, RAW_CAP = 8, 4, 6, 5, 9, 4
fails = 0


def ratio(layer):
    """ds4.c ds4_layer_compress_ratio: dense first two, then 4 / 128 alternating."""
    return 0 if layer < 2 else (4 if layer % 2 == 0 else 128)


def state_vals(r, width):
    c = 2 if r == 4 else 1
    return c * width * c * r


def f16_rows(n, width):
    return RNG.standard_normal((n, width)).astype(np.float16).astype(np.float32)


def session(n_comp=None, poke=None):
    """(payload bytes, {(layer, part): rows}) of a consistent session;
    n_comp overrides a layer's compressed row count, poke(parts) edits rows."""
    raw_live = min(RAW_CAP, TOKENS)
    parts, state = {}, {}
    for l in range(NL):
        r = ratio(l)
        parts[(l, "raw")] = f16_rows(raw_live, HD)
        if r:
            nc = TOKENS // r if not n_comp or l not in n_comp else n_comp[l]
            parts[(l, "comp")] = f16_rows(nc, HD)
            state[(l, "comp")] = RNG.standard_normal(2 * state_vals(r, HD)).astype(np.float32)
        if r == 4:
            parts[(l, "index")] = f16_rows(TOKENS // 4, IHD)
            state[(l, "index")] = RNG.standard_normal(2 * state_vals(4, IHD)).astype(np.float32)
    if poke:
        poke(parts)
    head = [0x34565344, 1, 4096, 256, RAW_CAP, RAW_CAP, 4096 // 4 + 2, TOKENS, NL, HD, IHD, VOCAB, raw_live]
    out = struct.pack("<13I", *head)
    out += struct.pack("<%dI" % TOKENS, *range(100, 100 + TOKENS))
    out += np.arange(VOCAB, dtype="<f4").tobytes()
    out += struct.pack("<%dI" % NL, *[len(parts.get((l, "comp"), [])) for l in range(NL)])
    out += struct.pack("<%dI" % NL, *[len(parts.get((l, "index"), [])) for l in range(NL)])
    for l in range(NL):
        out += parts[(l, "raw")].astype("<f4").tobytes()
        for p in ("comp", "index"):
            if (l, p) in parts:
                out += parts[(l, p)].astype("<f4").tobytes() + state[(l, p)].astype("<f4").tobytes()
    return out, parts


def kvc(payload, tokens=TOKENS, text=b"user: hello\n", trailer=b"TRAILER"):
    """ds4_kvstore_fill_header: 'KVC', version 1, quant_bits, reason, ext_flags, 0,
    tokens, hits, ctx, 0, created, last_used, payload_bytes; then text."""
    h = b"KVC" + bytes([1, 2, 1, 0, 0]) + struct.pack("<III", tokens, 0, 4096) + b"\0" * 4
    h += struct.pack("<QQQ", 1, 2, len(payload))
    assert len(h) == 48
    return h + struct.pack("<I", len(text)) + text + payload + trailer


def run(*args):
    p = subprocess.run([DSV4Q, "cache", "ds4", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(ok, what, detail=""):
    global fails
    print(("  ok    " if ok else "  FAIL  ") + what + ("" if ok else ": " + detail))
    fails += not ok


def main():
    tmp = tempfile.mkdtemp(prefix="dsv4q-ds4s-")
    path = lambda n: os.path.join(tmp, n)
    payload, parts = session()
    for name, data in (("bare.bin", payload), ("x.kv", kvc(payload))):
        open(path(name), "wb").write(data)
        rc, out, err = run(path(name))
        want = ["layer 0 ratio 0: raw 4", "layer 2 ratio 4: raw 4, compressed 2, indexer 2",
                "layer 3 ratio 128: raw 4, compressed 0", "consistent", "every row value is an F16 value"]
        check(rc == 0 and all(w in out for w in want), name + ": summary, per-layer rows, consistent", out + err)
        for (l, p), rows in parts.items():
            if not len(rows):
                continue
            rc, _, err = run(path(name), "--layer", str(l), "--part", p, "--out", path("rows.f64"))
            got = np.fromfile(path("rows.f64"), dtype="<f8") if rc == 0 else None
            same = got is not None and got.tobytes() == rows.astype(np.float64).ravel().tobytes()
            check(same, "%s: layer %d %s rows bit for bit" % (name, l, p), err)
    rc, out, _ = run(path("bare.bin"), "--layer", "4", "--part", "index")
    check(rc == 0 and out.count("\nrow ") + out.startswith("row ") == 2, "text rows of layer 4's indexer", out)

    bad, _ = session(n_comp={4: 1})
    open(path("missing.bin"), "wb").write(bad)
    rc, out, _ = run(path("missing.bin"))
    check(rc == 1 and "layer 4: 1 compressed rows, 9 tokens / ratio 4 = 2" in out, "a missing compressed row", out)

    def not_f16(p):
        p[(3, "raw")][2, 5] = np.float32(0.1)
    bad, _ = session(poke=not_f16)
    open(path("f32.bin"), "wb").write(bad)
    rc, out, _ = run(path("f32.bin"))
    check(rc == 0 and "1 are not F16 values, the first layer 3 raw row 2 [5]" in out, "a value not in F16", out)

    def nan(p):
        p[(2, "comp")][1, 0] = np.float32("nan")
    bad, _ = session(poke=nan)
    open(path("nan.bin"), "wb").write(bad)
    rc, out, _ = run(path("nan.bin"))
    check(rc == 1 and "layer 2 compressed row 1 [0]" in out and "not finite" in out, "a NaN row value", out)

    hostile = {
        "short.bin": (payload[:-3], "ends inside layer 4's indexer rows"),
        "magic.bin": (b"XSV4" + payload[4:], "magic"),
        "tail.bin": (payload + b"\0" * 8, "8 bytes after the last layer's rows"),
        "tokens.kv": (kvc(payload, tokens=TOKENS + 1), "the KVC header says 10 tokens, its payload 9"),
        "kvcshort.kv": (kvc(payload, trailer=b"")[:-1], "the KVC header declares"),
        "empty.bin": (b"", "ends inside the 13 header fields"),
    }
    for name, (data, msg) in hostile.items():
        open(path(name), "wb").write(data)
        rc, out, err = run(path(name))
        check(rc == 2 and msg in err and name in err and not out, "hostile %s: exit 2 naming it" % name, err + out)
    rc, _, err = run(path("bare.bin"), "--layer", "3", "--part", "index")
    check(rc == 2 and "layer 3 has no index rows" in err, "a part the layer lacks: exit 2", err)
    rc, _, err = run(path("bare.bin"), "--out", path("o.f64"))
    check(rc == 2 and "--out needs --layer" in err and not os.path.exists(path("o.f64")), "--out without --layer", err)
    print("%s: %s" % (os.path.basename(sys.argv[0]), "FAILED" if fails else "ok"))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
