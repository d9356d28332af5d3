#!/usr/bin/env python3
"""interop_safetensors.py - dsv4q's safetensors writer/reader vs the
`safetensors` package (the ecosystem's reference implementation).

Owns: the proof that files dsv4q writes open in `safetensors.safe_open`
with the right dtype, shape and values, and that files the package writes
open in dsv4q. Refuses: to build any safetensors bytes by hand; every file
on the Python side is made or read by the package, or the test would only
check dsv4q against itself. BF16 / F8 tensors are checked by dtype and shape
only: numpy has no such dtypes, so the package cannot hand their values to
numpy (their bytes are covered by the C round-trip tests).

Needs: python3 with numpy and safetensors (pip install numpy safetensors),
and the built C test binary (make build/tests/test_safetensors).

How to run, from the repository root:

    python3 tests/interop_safetensors.py                 # full round trip
    python3 tests/interop_safetensors.py run BINARY      # same, other binary
    python3 tests/interop_safetensors.py check FILE      # check a from_c file
    python3 tests/interop_safetensors.py write FILE      # write a from_py file

`run` makes a temp dir, writes from_py.safetensors there with the package,
runs BINARY (default build/tests/test_safetensors) with DSV4Q_INTEROP_DIR
set to it (its test_interop case then writes from_c.safetensors and reads
from_py.safetensors), then checks from_c.safetensors here. Exit status 0
means both directions agree. The tensor contract is documented next to
write_from_c / check_from_py in tests/test_safetensors.c.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

SHAPE = (3, 4)
FLOAT_DTS = {"f64": np.float64, "f32": np.float32, "f16": np.float16}
INT_DTS = {"i64": np.int64, "i32": np.int32, "i8": np.int8}


def expected(tag):
    """Element i of tensor c_<tag> / py_<tag>, per the C-side contract."""
    i = np.arange(12, dtype=np.float64)
    if tag == "u8":
        return i.reshape(SHAPE)
    if tag in FLOAT_DTS or tag == "bf16":
        return ((i - 4) * 0.25).reshape(SHAPE)
    return (i - 4).reshape(SHAPE)


def write_py(path):
    tensors = {}
    for tag, dt in {**FLOAT_DTS, **INT_DTS}.items():
        tensors["py_" + tag] = np.ascontiguousarray(expected(tag).astype(dt))
    tensors["py_u8"] = expected("u8").astype(np.uint8)
    save_file(tensors, path, metadata={"producer": "safetensors-python"})


def fail(msg):
    print("interop FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check_c(path):
    want_names = {"c_" + t for t in list(FLOAT_DTS) + list(INT_DTS) + ["u8", "bf16", "f8_e4m3", "f8_e8m0"]}
    want_names.add("c_e2m1_packed")
    numpy_dt = {"F64": np.float64, "F32": np.float32, "F16": np.float16,
                "I64": np.int64, "I32": np.int32, "I8": np.int8, "U8": np.uint8}
    with safe_open(path, framework="np") as f:
        names = set(f.keys())
        if names != want_names:
            fail(f"{path}: tensors {sorted(names)} != {sorted(want_names)}")
        meta = f.metadata() or {}
        if meta.get("producer") != "dsv4q" or meta.get("format") != "pt":
            fail(f"{path}: metadata {meta}")
        for name in sorted(names):
            tag = name[2:]
            sl = f.get_slice(name)
            dt, shape = sl.get_dtype(), list(sl.get_shape())
            if shape != list(SHAPE):
                fail(f"{name}: shape {shape} != {list(SHAPE)}")
            want_dt = {"bf16": "BF16", "f8_e4m3": "F8_E4M3", "f8_e8m0": "F8_E8M0",
                       "e2m1_packed": "I8"}.get(tag, tag.upper())
            if dt != want_dt:
                fail(f"{name}: dtype {dt} != {want_dt}")
            if dt not in numpy_dt:
                continue   # BF16 / F8: numpy cannot hold them; dtype + shape checked
            x = f.get_tensor(name)
            if x.dtype != numpy_dt[dt]:
                fail(f"{name}: numpy dtype {x.dtype}")
            if tag == "e2m1_packed":
                want = expected("u8").astype(np.int8)   # the packed bytes are 0..11
            else:
                want = expected(tag)
            if not np.array_equal(x.astype(np.float64), want.astype(np.float64)):
                fail(f"{name}: values {x.ravel().tolist()} != {want.ravel().tolist()}")
    print(f"interop: {path}: {len(want_names)} tensors match")


def run(binary):
    with tempfile.TemporaryDirectory(prefix="dsv4q_interop_") as d:
        write_py(os.path.join(d, "from_py.safetensors"))
        env = dict(os.environ, DSV4Q_INTEROP_DIR=d)
        r = subprocess.run([binary], env=env, capture_output=True, text=True)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        if r.returncode != 0:
            fail(f"{binary} exited {r.returncode}")
        if "test_interop" in r.stdout and "SKIPPED ] test_interop" in r.stdout:
            fail("test_interop was skipped")
        c_path = os.path.join(d, "from_c.safetensors")
        if not os.path.exists(c_path):
            fail(f"{binary} did not write {c_path}")
        check_c(c_path)
    print("interop: OK (python -> dsv4q and dsv4q -> python)")


def main(argv):
    if len(argv) >= 2 and argv[1] == "check" and len(argv) == 3:
        check_c(argv[2])
    elif len(argv) >= 2 and argv[1] == "write" and len(argv) == 3:
        write_py(argv[2])
    elif len(argv) == 1 or (argv[1] == "run" and len(argv) <= 3):
        run(argv[2] if len(argv) == 3 else "build/tests/test_safetensors")
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
