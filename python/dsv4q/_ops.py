"""The operators of the ABI as Python calls: ``dsv4q.oracle.<op>``, ``check``
and case keys.

Owns: the mapping from Python arguments (arrays by name or position, params
by name) to one C call. The operator table (names, inputs, params, output
shapes) is read from the library (``dsv4q_capi_ops_json``), so the Python
side never repeats a shape rule or a formula; the oracle, the metrics and
the gates are the C code `dsv4q qualify` runs.
"""
from __future__ import annotations

import ctypes

import numpy as np

from . import _lib
from ._lib import BT, BT_T, DSV4QError, as_array, enc, errbuf, fill_bt, lib, take_json
from ._verdict import Verdict

# Verdicts made since the last take_recorded() (the pytest plugin's receipts).
_recorded = []


def take_recorded():
    out = list(_recorded)
    del _recorded[:]
    return out


OPS = {o["name"]: o for o in take_json(lib.dsv4q_capi_ops_json())}
METRICS = take_json(lib.dsv4q_capi_metrics_json())

_RAW_DT = {"bf16": BT["bf16"], "f8_e4m3": BT["f8_e4m3"], "fp8": BT["f8_e4m3"], "e2m1": BT["i8"], "fp4": BT["i8"],
           "f32": BT["f32"]}
_SCALE_DT = {"e8m0": BT["f8_e8m0"], "ue8m0": BT["f8_e8m0"], "f32": BT["f32"]}


class Weight:
    """A weight given decoded (``values``, float32 [out, in]) and, optionally,
    in its stored form, so the oracle runs the reference's FP8/FP4 GEMM on the
    bytes a kernel loads: ``raw`` (BF16 codes uint16 [out,in]; F8_E4M3 codes
    uint8 [out,in] with ``scale`` E8M0 uint8 or float32
    [ceil(out/128), ceil(in/128)]; packed E2M1 uint8 [out, in/2], low nibble =
    even element, with E8M0 ``scale`` [out, in/32]). ``fmt`` is "bf16",
    "fp8" or "fp4"; ``scale_dtype`` "e8m0" (default) or "f32"."""

    def __init__(self, values, raw=None, fmt=None, scale=None, scale_dtype="e8m0"):
        self.values, self.raw, self.fmt, self.scale, self.scale_dtype = values, raw, fmt, scale, scale_dtype
        if raw is not None and fmt not in _RAW_DT:
            raise DSV4QError("dsv4q.Weight: fmt must be one of %s (got %r)" % (", ".join(_RAW_DT), fmt))
        if scale is not None and scale_dtype not in _SCALE_DT:
            raise DSV4QError("dsv4q.Weight: scale_dtype must be e8m0 or f32 (got %r)" % (scale_dtype,))


# bytes per element of each raw form (dsv4q_backend.h)
_RAW_ITEM = {"bf16": 2, "f8_e4m3": 1, "fp8": 1, "e2m1": 1, "fp4": 1, "f32": 4}


def _raw_bytes(a, what, itemsize):
    """A raw stored form as contiguous numpy, its element size checked (a
    wrong dtype would make the C side read past the buffer). torch bfloat16
    / float8 tensors are taken as their codes."""
    if type(a).__module__.startswith("torch"):
        import torch
        a = a.detach().cpu().contiguous()
        if a.dtype.is_floating_point and a.element_size() in (1, 2) and a.dtype != torch.float16:
            a = a.view(torch.uint8 if a.element_size() == 1 else torch.int16)
        a = a.numpy()
    a = np.ascontiguousarray(np.asarray(a))
    if a.dtype.itemsize != itemsize or (itemsize == 4 and a.dtype != np.float32):
        raise DSV4QError("dsv4q.Weight %s: raw data has dtype %s (%d bytes per element), expected %d-byte codes"
                         % (what, a.dtype, a.dtype.itemsize, itemsize))
    return a


def _param(op, name, v):
    """A param value as float. bool and str are refused: float(True) is 1.0
    and float("1e-6") parses, so eps=True or a param read from text would run
    as a number nobody wrote."""
    if isinstance(v, (bool, np.bool_, str, bytes)):
        raise DSV4QError("dsv4q: %s: param %s must be a number (got %s %r)" % (op, name, type(v).__name__, v))
    try:
        return float(v)
    except (TypeError, ValueError):
        raise DSV4QError("dsv4q: %s: param %s must be a number (got %s %r)" % (op, name, type(v).__name__, v)) from None


def _op(op):
    if op not in OPS:
        raise DSV4QError("dsv4q: unknown operator %r (operators: %s)" % (op, ", ".join(OPS)))
    return OPS[op]


class _Call:
    """The C tensors of one call; keeps the numpy buffers alive."""

    def __init__(self, op, inputs, params):
        self.info = info = _op(op)
        self.op = info["op"]
        names = [t["name"] for t in info["inputs"]]
        if isinstance(inputs, dict):
            unknown = set(inputs) - set(names)
            if unknown:
                raise DSV4QError("dsv4q: %s has no input %s (inputs: %s)" % (op, ", ".join(sorted(unknown)),
                                                                               ", ".join(names)))
            vals = [inputs.get(n) for n in names]
        else:
            vals = list(inputs)
            if len(vals) != len(names):
                raise DSV4QError("dsv4q: %s takes %d inputs (%s), got %d" % (op, len(names), ", ".join(names), len(vals)))
        self.keep = []
        self.inp = (BT_T * max(1, len(names)))()
        for i, (t, v) in enumerate(zip(info["inputs"], vals)):
            bt = self.inp[i]
            if v is None:
                if not t["optional"]:
                    raise DSV4QError("dsv4q: %s: input %s %s is required" % (op, t["name"], t["shape"]))
                bt.name = enc(t["name"])
                bt.dtype = BT[t["dtype"].lower()] if t["dtype"] in ("I32", "I64") else BT["f32"]
                continue
            w = v if isinstance(v, Weight) else None
            arr, dt = as_array(w.values if w else v, t["name"], t["dtype"].lower() if t["dtype"] in ("I32", "I64") else "f32")
            fill_bt(bt, t["name"], arr, dt)
            self.keep.append(arr)
            if w is not None and w.raw is not None:
                raw = _raw_bytes(w.raw, t["name"], _RAW_ITEM[w.fmt])
                self.keep.append(raw)
                bt.raw = raw.ctypes.data
                bt.raw_dtype = _RAW_DT[w.fmt]
                bt.raw_ndim = raw.ndim
                for k, n in enumerate(raw.shape):
                    bt.raw_shape[k] = n
                if w.scale is not None:
                    if w.scale_dtype == "f32":
                        sc = np.ascontiguousarray(np.asarray(w.scale), dtype=np.float32)
                    else:   # E8M0 codes: never convert values (0.5 -> 0 would be silent garbage)
                        sc = _raw_bytes(w.scale, t["name"] + " scale", 1)
                    self.keep.append(sc)
                    bt.raw_scale = sc.ctypes.data
                    bt.scale_dtype = _SCALE_DT[w.scale_dtype]
                    for k, n in enumerate(sc.shape[:2]):
                        bt.scale_shape[k] = n
        pnames = [p["name"] for p in info["params"]]
        if isinstance(params, dict):
            unknown = set(params) - set(pnames)
            if unknown:
                raise DSV4QError("dsv4q: %s has no param %s (params: %s)" % (op, ", ".join(sorted(unknown)),
                                                                               "; ".join(p["doc"] for p in info["params"])))
            missing = [n for n in pnames if n not in params]
            if missing:
                raise DSV4QError("dsv4q: %s: missing param %s (%s)" % (
                    op, ", ".join(missing), "; ".join(p["doc"] for p in info["params"] if p["name"] in missing)))
            pv = [_param(op, n, params[n]) for n in pnames]
        else:
            pv = [_param(op, pnames[k] if k < len(pnames) else "#%d" % k, x) for k, x in enumerate(params)]
            if len(pv) != len(pnames):
                raise DSV4QError("dsv4q: %s takes %d params (%s), got %d" % (op, len(pnames), ", ".join(pnames), len(pv)))
        self.params = (ctypes.c_double * max(1, len(pv)))(*pv)
        self.nin, self.nparam, self.nout = len(names), len(pv), len(info["outputs"])

    def templates(self):
        out = (BT_T * max(1, self.nout))()
        err = errbuf()
        if lib.dsv4q_capi_shapes(self.op, self.inp, self.nin, self.params, self.nparam, out, self.nout, err,
                                 len(err)):
            raise DSV4QError(err.value.decode())
        return out


def run_oracle(op, inputs, params, width="f64", profile="source", boundary=None):
    """Run the oracle on one call; returns a tuple of numpy outputs (float64
    at width "f64", float32 at "f32"; int32 for index outputs), or the single
    array when the operator has one output."""
    if width not in ("f64", "f32"):
        raise DSV4QError("dsv4q: width must be 'f64' or 'f32' (got %r)" % (width,))
    c = _Call(op, inputs, params)
    out = c.templates()
    arrs = []
    for i in range(c.nout):
        shape = tuple(out[i].shape[k] for k in range(out[i].ndim))
        dt = np.int32 if out[i].dtype == BT["i32"] else (np.float64 if width == "f64" else np.float32)
        a = np.zeros(shape, dtype=dt)
        arrs.append(a)
        out[i].data = a.ctypes.data if a.size else ctypes.addressof(_lib._DUMMY)
    err = errbuf()
    if lib.dsv4q_capi_oracle(c.op, 64 if width == "f64" else 32, enc(profile), enc(boundary or ""), c.inp, c.nin,
                             c.params, c.nparam, out, c.nout, err, len(err)):
        raise DSV4QError(err.value.decode())
    return arrs[0] if len(arrs) == 1 else tuple(arrs)


def _cands(info, outputs, tmpl, keep, of=""):
    """The candidate tensors of ``outputs``; ``of`` (" of rerun=") names the
    second run in every error, so a bad rerun is not blamed on the outputs."""
    names = [t["name"] for t in info["outputs"]]
    if isinstance(outputs, dict):
        unknown = set(outputs) - set(names)
        if unknown or len(outputs) != len(names):
            raise DSV4QError("dsv4q: %s outputs are %s (got %s%s)" % (info["name"], ", ".join(names),
                                                                       ", ".join(outputs), of))
        vals = [outputs[n] for n in names]
    elif isinstance(outputs, (list, tuple)):
        vals = list(outputs)
    else:
        vals = [outputs]
    if len(vals) != len(names):
        raise DSV4QError("dsv4q: %s gives %d outputs (%s), got %d%s" % (info["name"], len(names), ", ".join(names),
                                                                         len(vals), of))
    c = (BT_T * max(1, len(names)))()
    for i, (n, v, t) in enumerate(zip(names, vals, info["outputs"])):
        arr, dt = as_array(v, n + of, "out_i32" if t["dtype"] == "I32" else "out_f")
        keep.append(arr)
        fill_bt(c[i], n, arr, dt)
    return c


def check(op, inputs, outputs, profile="source", *, params=None, boundary=None, gates=None, rerun=None, **kw):
    """Judge a kernel's outputs for one call as ``dsv4q qualify`` judges a
    backend of ``profile``: reference = oracle-f64, level = oracle-f32 vs
    oracle-f64 on the same inputs, every metric of every output, bound =
    factor * level + floor from the gate file (``gates`` path; default
    gates/default.json). ``inputs``: dict by input name (or a sequence in
    table order) of numpy arrays / CPU torch tensors / ``Weight``;
    ``outputs``: the kernel's outputs (dict by name, sequence, or one array),
    float32, float16 or bfloat16 (ULPs counted in that dtype), int32 for
    index outputs; ``rerun``: a second run's outputs (run-to-run metric).
    Params by keyword (``eps=1e-6``) or ``params=``. Returns a ``Verdict``."""
    params = dict(params or {}, **kw)
    c = _Call(op, inputs, params)
    tmpl = c.templates()
    keep = []
    cand = _cands(c.info, outputs, tmpl, keep)
    cand2 = _cands(c.info, rerun, tmpl, keep, " of rerun=") if rerun is not None else None
    err = errbuf()
    j = take_json(lib.dsv4q_capi_check(c.op, enc(profile), enc(boundary or ""), enc(gates or _lib.default_gates()), c.inp, c.nin,
                                       c.params, c.nparam, cand, cand2, c.nout, err, len(err)), err)
    v = Verdict(j)
    _recorded.append(v)
    return v


class Case:
    """A qualification case by key (harness/cases/cases.h), e.g.
    ``Case("sparse_attn(recipe=masked)")``: ``.key`` (canonical), ``.op``,
    ``.inputs`` (dict of numpy arrays / ``Weight``), ``.params`` (dict)."""

    def __init__(self, key):
        err = errbuf()
        self._c = lib.dsv4q_capi_case_new(enc(key), err, len(err))
        if not self._c:
            raise DSV4QError(err.value.decode())
        self.key = lib.dsv4q_capi_case_key(self._c).decode()
        opi = lib.dsv4q_capi_case_op(self._c)
        self.op = next(n for n, o in OPS.items() if o["op"] == opi)
        info = OPS[self.op]
        n = ctypes.c_int()
        ins = lib.dsv4q_capi_case_inputs(self._c, ctypes.byref(n))
        self.inputs = {}
        for i in range(n.value):
            bt = ins[i]
            name = info["inputs"][i]["name"]
            vals = _lib.bt_to_array(bt)
            if vals is None:
                self.inputs[name] = None
            elif bt.raw:
                raw_bt = BT_T()
                raw_bt.ndim, raw_bt.dtype = bt.raw_ndim, {4: 4}.get(bt.raw_dtype, 9)
                for k in range(bt.raw_ndim):
                    raw_bt.shape[k] = bt.raw_shape[k]
                nraw = int(np.prod([bt.raw_shape[k] for k in range(bt.raw_ndim)]))
                esz = {4: 2, 5: 1, 7: 1, 2: 4}[bt.raw_dtype]
                raw = np.frombuffer((ctypes.c_char * (nraw * esz)).from_address(bt.raw), dtype={
                    2: np.float32, 4: np.uint16}.get(bt.raw_dtype, np.uint8)).reshape(
                    [bt.raw_shape[k] for k in range(bt.raw_ndim)]).copy()
                scale = None
                if bt.raw_scale:
                    ns = int(bt.scale_shape[0] * bt.scale_shape[1])
                    sdt = np.float32 if bt.scale_dtype == BT["f32"] else np.uint8
                    scale = np.frombuffer((ctypes.c_char * (ns * np.dtype(sdt).itemsize)).from_address(bt.raw_scale),
                                          dtype=sdt).reshape(bt.scale_shape[0], bt.scale_shape[1]).copy()
                fmt = {4: "bf16", 5: "fp8", 7: "fp4", 2: "f32"}[bt.raw_dtype]
                self.inputs[name] = Weight(vals, raw=raw, fmt=fmt, scale=scale,
                                           scale_dtype="f32" if bt.scale_dtype == BT["f32"] else "e8m0")
            else:
                self.inputs[name] = vals
        p = lib.dsv4q_capi_case_params(self._c, ctypes.byref(n))
        self.params = {info["params"][i]["name"]: p[i] for i in range(n.value)}

    def __del__(self):
        if getattr(self, "_c", None):
            lib.dsv4q_capi_case_free(self._c)
            self._c = None

    def run_backend(self, spec, profile="source"):
        """Run a backend (built-in name such as "cpu-ref" or "mutant:NAME", or a
        plugin .so path) twice on this case in an isolated child, exactly as
        qualify does. Returns (run1, run2): lists of numpy outputs in the
        backend's storage dtype (float32, or uint16 BF16/F16 codes; int32)."""
        info = OPS[self.op]
        nout = len(info["outputs"])
        o1, o2 = (BT_T * nout)(), (BT_T * nout)()
        bufs = []
        for i in range(nout):
            nb = lib.dsv4q_capi_case_out_bytes(self._c, i) + 4
            for o in (o1, o2):
                b = ctypes.create_string_buffer(nb)
                bufs.append(b)
                o[i].data = ctypes.addressof(b)
        err = errbuf()
        if lib.dsv4q_capi_case_run(self._c, enc(spec), enc(profile), o1, o2, err, len(err)):
            raise DSV4QError(err.value.decode())
        runs = []
        for o in (o1, o2):
            run = []
            for i in range(nout):
                a = _lib.bt_to_array(o[i])
                if o[i].dtype == BT["bf16"]:
                    a = _BF16Codes(a)
                run.append(a)
            runs.append(run)
        return runs[0], runs[1]

    def check(self, outputs, profile="source", *, boundary=None, gates=None, rerun=None):
        """``dsv4q.check`` on this case's own inputs (with the case builder's
        moe_gate tie rule): the verdict `dsv4q qualify --case KEY` gives."""
        info = OPS[self.op]
        keep = []
        cand = _cands(info, outputs, None, keep)
        cand2 = _cands(info, rerun, None, keep, " of rerun=") if rerun is not None else None
        err = errbuf()
        j = take_json(lib.dsv4q_capi_check_case(self._c, enc(profile), enc(boundary or ""), enc(gates or _lib.default_gates()), cand,
                                                cand2, len(info["outputs"]), err, len(err)), err)
        v = Verdict(j)
        _recorded.append(v)
        return v


class _BF16Codes(np.ndarray):
    """uint16 array marked as BF16 codes (a backend's BF16 output)."""

    def __new__(cls, a):
        return np.asarray(a, dtype=np.uint16).view(cls)


class _OracleNS:
    """``dsv4q.oracle.<op>(*inputs, width="f64", profile="source",
    boundary=None, **params)``: one function per ABI operator (see
    ``help(dsv4q.oracle.linear)``)."""

    def __init__(self):
        for name, info in OPS.items():
            setattr(self, name, self._make(name, info))

    @staticmethod
    def _make(name, info):
        ins = [t["name"] for t in info["inputs"]]
        pnames = [p["name"] for p in info["params"]]

        def f(*args, width="f64", profile="source", boundary=None, **kw):
            inputs = dict(zip(ins, args))
            for n in list(kw):
                if n in ins:
                    inputs[n] = kw.pop(n)
            if len(args) > len(ins):
                raise DSV4QError("dsv4q.oracle.%s takes %d inputs (%s)" % (name, len(ins), ", ".join(ins)))
            return run_oracle(name, inputs, kw, width=width, profile=profile, boundary=boundary)

        f.__name__ = name
        f.__doc__ = ("%s(%s, *, %s, width='f64', profile='source', boundary=None)\n\n"
                     "Oracle: %s; reference: %s.\nInputs:\n%s\nParams:\n%s\nOutputs:\n%s\n%s" % (
                         name, ", ".join(ins), ", ".join(pnames), info["oracle"], info["reference"],
                         "\n".join("  %s %s %s %s" % (t["name"], t["shape"], t["dtype"], t["doc"]) for t in info["inputs"]),
                         "\n".join("  " + p["doc"] for p in info["params"]),
                         "\n".join("  %s %s %s %s" % (t["name"], t["shape"], t["dtype"], t["doc"])
                                   for t in info["outputs"]),
                         info["notes"] + "\n" if info.get("notes") else ""))
        return f


oracle = _OracleNS()
