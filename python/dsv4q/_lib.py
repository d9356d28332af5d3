"""Loading libdsv4q.so and moving arrays across the C API (ctypes).

Owns: finding the shared library, the ctypes mirror of the frozen ABI
struct ``dsv4q_bt`` (abi/dsv4q_backend.h), and the conversion of numpy
arrays / torch tensors to ``dsv4q_bt`` without copies when they are
contiguous float32 / int32 CPU tensors (device tensors are copied to the
host; BF16 / F16 inputs are widened to F32, which is exact). No numerics live here: every number comes
from the C library (cli/dsv4q_capi.h).

Library lookup order: ``$DSV4Q_LIB`` (a path to libdsv4q.so), the copy
bundled into the package at install time (``dsv4q/_lib/libdsv4q.so``), the
tree's ``build/libdsv4q.so`` when the package runs from a checkout,
``pkg-config --variable=libdir dsv4q`` (after ``make install``), then the
system loader (``libdsv4q.so.1``).
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

# dtype values of enum dsv4q_bt_dtype (abi/dsv4q_backend.h)
BT = {"none": 0, "f64": 1, "f32": 2, "f16": 3, "bf16": 4, "f8_e4m3": 5, "f8_e8m0": 6,
      "i8": 7, "e2m1": 7, "u8": 8, "i32": 9, "i64": 10}
BT_NAME = {2: "F32", 3: "F16", 4: "BF16", 9: "I32"}


class BT_T(ctypes.Structure):
    """ctypes mirror of ``dsv4q_bt`` (ABI v1, frozen)."""
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 6), ("data", ctypes.c_void_p),
                ("raw", ctypes.c_void_p), ("raw_dtype", ctypes.c_int32), ("raw_ndim", ctypes.c_int32),
                ("raw_shape", ctypes.c_int64 * 6), ("raw_scale", ctypes.c_void_p),
                ("scale_dtype", ctypes.c_int32), ("scale_shape", ctypes.c_int64 * 2)]


class DSV4QError(ValueError):
    """A call the C side rejected (bad shape, dtype, profile, ...)."""


def _candidates():
    env = os.environ.get("DSV4Q_LIB")
    if env:
        yield Path(env)
        return
    here = Path(__file__).resolve().parent
    yield here / "_lib" / "libdsv4q.so"
    for up in (here.parent.parent, here.parent):   # python/dsv4q -> repo root
        yield up / "build" / "libdsv4q.so"
    if shutil.which("pkg-config"):
        try:
            d = subprocess.run(["pkg-config", "--variable=libdir", "dsv4q"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
            if d:
                yield Path(d) / "libdsv4q.so.1"
        except (OSError, subprocess.SubprocessError):
            pass


def _load():
    tried = []
    for p in _candidates():
        tried.append(str(p))
        if p.exists():
            return ctypes.CDLL(str(p))
    try:
        return ctypes.CDLL("libdsv4q.so.1")
    except OSError:
        tried.append("libdsv4q.so.1 (system loader)")
    raise ImportError("dsv4q: libdsv4q.so not found; build it (`make` in the dsv4q tree), `make install`, "
                      "or set DSV4Q_LIB=/path/to/libdsv4q.so. Tried: " + ", ".join(tried))


lib = _load()
_P = ctypes.POINTER(BT_T)
_E = ctypes.c_char_p
_S = ctypes.c_size_t
_D = ctypes.POINTER(ctypes.c_double)
for name, res, args in [
    ("dsv4q_capi_version", ctypes.c_int, []),
    ("dsv4q_capi_free", None, [ctypes.c_void_p]),
    ("dsv4q_capi_op_find", ctypes.c_int, [ctypes.c_char_p]),
    ("dsv4q_capi_ops_json", ctypes.c_void_p, []),
    ("dsv4q_capi_metrics_json", ctypes.c_void_p, []),
    ("dsv4q_capi_shapes", ctypes.c_int, [ctypes.c_int, _P, ctypes.c_int, _D, ctypes.c_int, _P, ctypes.c_int, _E, _S]),
    ("dsv4q_capi_oracle", ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, _P,
                                         ctypes.c_int, _D, ctypes.c_int, _P, ctypes.c_int, _E, _S]),
    ("dsv4q_capi_check", ctypes.c_void_p, [ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, _P,
                                           ctypes.c_int, _D, ctypes.c_int, _P, _P, ctypes.c_int, _E, _S]),
    ("dsv4q_capi_case_new", ctypes.c_void_p, [ctypes.c_char_p, _E, _S]),
    ("dsv4q_capi_case_free", None, [ctypes.c_void_p]),
    ("dsv4q_capi_case_key", ctypes.c_char_p, [ctypes.c_void_p]),
    ("dsv4q_capi_case_op", ctypes.c_int, [ctypes.c_void_p]),
    ("dsv4q_capi_case_inputs", _P, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    ("dsv4q_capi_case_outputs", _P, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    ("dsv4q_capi_case_params", _D, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]),
    ("dsv4q_capi_case_out_bytes", _S, [ctypes.c_void_p, ctypes.c_int]),
    ("dsv4q_capi_case_run", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, _P, _P, _E, _S]),
    ("dsv4q_capi_check_case", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                                _P, _P, ctypes.c_int, _E, _S]),
]:
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = args

if lib.dsv4q_capi_version() != 1:
    raise ImportError("dsv4q: libdsv4q.so has C API version %d, this package needs 1" % lib.dsv4q_capi_version())


def default_gates():
    """The gate file check() uses when none is given: $DSV4Q_GATES, the copy
    bundled into the package, the tree's gates/default.json (checkout), or
    PREFIX/share/dsv4q/gates/default.json next to an installed library."""
    env = os.environ.get("DSV4Q_GATES")
    if env:
        return env
    here = Path(__file__).resolve().parent
    for p in (here / "_lib" / "default.json", here.parent.parent / "gates" / "default.json",
              Path(lib._name).resolve().parent.parent / "share" / "dsv4q" / "gates" / "default.json",
              Path(lib._name).resolve().parent.parent / "gates" / "default.json"):
        if p.exists():
            return str(p)
    raise DSV4QError("dsv4q: no default gate file found (set DSV4Q_GATES or pass gates=PATH)")


def errbuf():
    return ctypes.create_string_buffer(2048)


def take_json(ptr, err=None):
    """Parse and free a malloc'd JSON string from the C API (NULL -> error)."""
    if not ptr:
        raise DSV4QError(err.value.decode() if err is not None else "dsv4q: C API returned NULL")
    try:
        return json.loads(ctypes.string_at(ptr).decode())
    finally:
        lib.dsv4q_capi_free(ptr)


def enc(s):
    return s.encode() if isinstance(s, str) else s


# ---- arrays ---------------------------------------------------------------

def _torch_to_numpy(t):
    """torch tensor -> numpy: a view of a contiguous CPU tensor; a device
    tensor (CUDA, ...) is copied to the host first; bfloat16 as its uint16
    codes."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if str(t.dtype) == "torch.bfloat16":
        import torch
        return t.contiguous().view(torch.int16).numpy().view(np.uint16), "bf16"
    return t.contiguous().numpy(), None


def _narrow_ints(a, what, to):
    """a (an integer array) as `to` (np.int32 / np.int64), refusing values
    that do not fit: a cast would wrap them (2**32 + 1 would act as 1)."""
    info = np.iinfo(to)
    if a.size and (np.iinfo(a.dtype).max > info.max or np.iinfo(a.dtype).min < info.min):
        bad = np.flatnonzero((a > info.max) | (a < info.min))
        if bad.size:
            at = np.unravel_index(bad[0], a.shape)
            raise DSV4QError("dsv4q: %s (%s) has value %d at index %s, outside the %s range [%d, %d] (%d such "
                             "value(s))" % (what, a.dtype, a.flat[bad[0]], tuple(int(k) for k in at),
                                            np.dtype(to).name, info.min, info.max, bad.size))
    return np.ascontiguousarray(a, dtype=to)


def as_array(a, what, kind):
    """Return (contiguous numpy array, bt dtype) for an input.

    kind "f32": float inputs (float32 is used as is; other float dtypes are
    converted); "i32" / "i64": integer inputs (32 / 64 bits; any integer
    dtype whose values fit, so torch's int64 indices are taken); "out_f":
    a float candidate output (float32, float16 or bfloat16, kept in that
    storage dtype: the ULPs are counted in it, so float64 is refused rather
    than judged as F32); "out_i32": an index output (int32, or any integer
    dtype whose values fit int32)."""
    tag = None
    if kind.startswith("out") and type(a).__name__ == "_BF16Codes":   # dsv4q.bf16_codes(...)
        if kind == "out_i32":
            raise DSV4QError("dsv4q: output %s holds BF16 codes: expected int32 (an index output)" % what)
        return np.ascontiguousarray(a.view(np.ndarray)), BT["bf16"]
    if type(a).__module__.startswith("torch"):
        a, tag = _torch_to_numpy(a)
    a = np.asarray(a)
    if kind == "out_f":
        if tag == "bf16":
            return np.ascontiguousarray(a), BT["bf16"]
        if a.dtype == np.float16:
            return np.ascontiguousarray(a).view(np.uint16), BT["f16"]
        if a.dtype != np.float32:
            raise DSV4QError("dsv4q: output %s has dtype %s: expected float32, float16 or bfloat16, the dtype the "
                             "kernel stores (ULPs are counted in it; cast an FP32 kernel's result to float32)"
                             % (what, "bfloat16" if tag == "bf16" else a.dtype))
        return np.ascontiguousarray(a), BT["f32"]
    if kind == "out_i32":
        if a.dtype.kind not in "iu":
            raise DSV4QError("dsv4q: output %s has dtype %s: expected int32 (an index output; int64 is taken when "
                             "every value fits int32)" % (what, a.dtype))
        return _narrow_ints(a, "output " + what, np.int32), BT["i32"]
    if tag == "bf16":   # BF16 -> F32 is exact: the code in the high half
        return (a.astype(np.uint32) << np.uint32(16)).view(np.float32), BT["f32"]
    if kind in ("i32", "i64"):
        if a.dtype.kind not in "iu":
            raise DSV4QError("dsv4q: input %s must be an integer array (got %s)" % (what, a.dtype))
        return _narrow_ints(a, "input " + what, np.int32 if kind == "i32" else np.int64), BT[kind]
    if a.dtype.kind not in "fiu":
        raise DSV4QError("dsv4q: input %s must be a float array (got %s)" % (what, a.dtype))
    return np.ascontiguousarray(a, dtype=np.float32), BT["f32"]


def fill_bt(bt, name, arr, dtype):
    if arr.ndim > 6:
        raise DSV4QError("dsv4q: %s has %d dimensions (at most 6)" % (name, arr.ndim))
    bt.name = enc(name)
    bt.dtype = dtype
    bt.ndim = arr.ndim
    for k, n in enumerate(arr.shape):
        bt.shape[k] = n
    bt.data = arr.ctypes.data if arr.size else ctypes.addressof(_DUMMY)


_DUMMY = ctypes.c_double(0)


def bt_to_array(bt, data=None):
    """Copy a C tensor's data (F32 / I32 / I64 / BF16 or F16 codes) into numpy."""
    shape = tuple(bt.shape[k] for k in range(bt.ndim))
    n = int(np.prod(shape)) if shape else 0
    ptr = data if data is not None else bt.data
    if bt.ndim == 0 or not ptr:
        return None
    dt = {2: np.float32, 9: np.int32, 10: np.int64, 3: np.uint16, 4: np.uint16}[bt.dtype]
    buf = (ctypes.c_char * (n * np.dtype(dt).itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype=dt).reshape(shape).copy()
