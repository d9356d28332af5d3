"""Inputs, outputs and params that used to be accepted silently (issue 28)
are refused with an error naming the tensor or param and what is valid;
what is valid still works (torch's int64 indices, eps = 0).

Each case states the wrong result the silent path gave: an int64 index
2**32 + 1 cast to int32 reads as row 1; a float64 output was judged as F32;
iters = 20.5 ran 20 rounds, ue8m0 = 1.5 ran as 1 and p = 127.5 as 127; a
NaN input made a FAIL verdict of a kernel that did nothing wrong.
"""
import numpy as np
import pytest

import dsv4q


def attn_call(idx):
    q = np.ones((1, 2, 4), np.float32)
    kv = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
    sink = np.full(2, -np.inf, np.float32)
    return dsv4q.oracle.sparse_attn(q, kv, idx, sink, scale=0.5, profile="exact")


def test_int64_indices_in_range_are_taken():
    o = attn_call(np.array([[1, -1, 7]], np.int64))
    kv = np.arange(12, dtype=np.float32).reshape(3, 4) / 8
    assert np.array_equal(o[0, 0], kv[1])           # the one live column is row 1 (hand: softmax of one score)


def test_int64_index_outside_int32_is_refused():
    idx = np.array([[1, -1, 2 ** 32 + 1]], np.int64)   # a cast would make it 1: row 1 counted twice
    with pytest.raises(dsv4q.DSV4QError) as e:
        attn_call(idx)
    m = str(e.value)
    assert "input idx (int64) has value 4294967297 at index (0, 2)" in m and "int32 range" in m


def test_int64_output_outside_int32_is_refused_and_in_range_taken():
    s = np.array([[5.0, 4.0, 3.0, 2.0]], np.float32)
    assert dsv4q.check("topk", {"score": s}, np.array([[0, 1]], np.int64), k=2).passed
    with pytest.raises(dsv4q.DSV4QError, match=r"output idx \(int64\) has value -4294967296 at index \(0, 1\)"):
        dsv4q.check("topk", {"score": s}, np.array([[0, -2 ** 32]], np.int64), k=2)


def rms_inputs():
    r = np.random.default_rng(1)
    return {"x": r.standard_normal((2, 8)).astype(np.float32), "w": np.ones(8, np.float32)}


def test_float64_output_is_refused_naming_the_expected_dtypes():
    i = rms_inputs()
    y = dsv4q.oracle.rmsnorm(i["x"], i["w"], eps=1e-6, profile="exact")   # float64
    with pytest.raises(dsv4q.DSV4QError) as e:
        dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6)
    assert "output y has dtype float64: expected float32, float16 or bfloat16" in str(e.value)
    assert dsv4q.check("rmsnorm", i, y.astype(np.float32), "exact", eps=1e-6).passed


def test_integer_output_for_a_float_output_names_the_dtypes():
    i = rms_inputs()
    with pytest.raises(dsv4q.DSV4QError) as e:
        dsv4q.check("rmsnorm", i, np.zeros((2, 8), np.int64), "exact", eps=1e-6)
    m = str(e.value)
    assert "output y has dtype int64: expected float32, float16 or bfloat16" in m and "dtype 9" not in m


def test_c_api_names_dtypes_too():
    """The library's own message (a C caller's) names the dtype, not its
    enum value: an I32 buffer where F32 is expected."""
    from dsv4q import _lib
    from dsv4q._ops import _Call
    i = rms_inputs()
    c = _Call("rmsnorm", i, {"eps": 1e-6})
    out = (_lib.BT_T * 1)()
    y = np.zeros((2, 8), np.int32)
    _lib.fill_bt(out[0], "y", y, _lib.BT["i32"])
    err = _lib.errbuf()
    p = _lib.lib.dsv4q_capi_check(c.op, b"exact", b"", _lib.default_gates().encode(), c.inp, c.nin, c.params,
                                  c.nparam, out, None, 1, err, len(err))
    assert not p
    assert err.value.decode() == "rmsnorm: output y must be float32, bfloat16 or float16 (got I32)"


@pytest.mark.parametrize("iters", [-1, 0, 20.5, 1001])
def test_iters_out_of_range(iters):
    c = dsv4q.Case("hc_pre(s=1,hc=4,d=64,recipe=normal,seed=1)")
    p = dict(c.params, iters=iters)
    with pytest.raises(ValueError, match=r"hc_pre: param iters = %g is out of range: an integer in 1\.\.1000" % iters):
        dsv4q.oracle.hc_pre(**{k: getattr(v, "values", v) for k, v in c.inputs.items()}, **p)


@pytest.mark.parametrize("op,param", [("rmsnorm", "eps"), ("hc_pre", "norm_eps"), ("hc_pre", "hc_eps")])
def test_negative_eps_refused(op, param):
    if op == "rmsnorm":
        i, p = rms_inputs(), {"eps": 1e-6}
    else:
        c = dsv4q.Case("hc_pre(s=1,hc=4,d=64,recipe=normal,seed=1)")
        i, p = {k: getattr(v, "values", v) for k, v in c.inputs.items()}, dict(c.params)
    p[param] = -1
    with pytest.raises(ValueError, match=r"%s: param %s = -1 is out of range: %s must be >= 0" % (op, param, param)):
        getattr(dsv4q.oracle, op)(**i, **p)
    p[param] = 0.0                                    # 0 is allowed (the hand value of test_oracle uses it)
    getattr(dsv4q.oracle, op)(**i, **p)


def test_nan_input_is_an_error_naming_the_first_nan():
    i = rms_inputs()
    y = dsv4q.oracle.rmsnorm(i["x"], i["w"], eps=1e-6, profile="exact", width="f32")
    i["x"][1, 5] = np.nan
    i["x"][1, 6] = np.nan
    with pytest.raises(dsv4q.DSV4QError) as e:
        dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6)
    assert "rmsnorm: input x has a NaN at index [1,5] (flat 13)" in str(e.value)
    # -inf stays a valid input (a masked score, an absent sink)
    assert attn_call(np.array([[1, -1, 7]], np.int32)).shape == (1, 2, 4)


def _case_call(key, **change):
    c = dsv4q.Case(key)
    p = dict(c.params, **change)
    return getattr(dsv4q.oracle, c.op)(**{k: getattr(v, "values", v) for k, v in c.inputs.items()}, **p,
                                       width="f32", profile="exact")


@pytest.mark.parametrize("key,param,bad", [
    ("act_quant(rows=2,n=256,block=128,recipe=normal,seed=1)", "ue8m0", 1.5),   # ran as ue8m0 = 1
    ("rope(rows=8,r=64,pos=131072,rope=yarn,inv=1,recipe=normal,seed=1)", "inverse", 2),   # ran as inverse
    ("compressor(s=8,d=64,ratio=4,Dc=512,rotate=0,recipe=normal,seed=1)", "rotate", 0.5),   # ran as rotate = 1
])
def test_switch_param_must_be_0_or_1(key, param, bad):
    want = r": param %s = %g is out of range: %s must be 0 or 1 \(a switch\)" % (param, bad, param)
    with pytest.raises(ValueError, match=want):
        _case_call(key, **{param: bad})


@pytest.mark.parametrize("key,param,bad", [
    ("topk(rows=2,T=64,k=8,recipe=normal,seed=1)", "k", 8.5),        # was "cannot size output idx"
    ("moe_gate(s=4,d=64,E=256,k=6,route=topk,func=sqrtsoftplus,recipe=normal,seed=1)", "score_func", 0.5),  # ran as 0
    ("window_attn_decode(H=64,D=512,win=128,p=127,sel=512,recipe=normal,seed=1)", "p", 127.5),   # ran at 127
])
def test_integer_param_must_be_an_integer(key, param, bad):
    with pytest.raises(ValueError, match=r": param %s = %g is out of range: %s must be an integer" % (param, bad, param)):
        _case_call(key, **{param: bad})
    _case_call(key)                                   # the case's own (integer) value runs


def test_a_bad_rerun_is_named_as_the_rerun():
    """The checks of rerun= name it: the same message for the outputs sent
    the user to a first run that was fine."""
    s = np.array([[5.0, 4.0, 3.0, 2.0]], np.float32)
    good = np.array([[0, 1]], np.int64)
    with pytest.raises(dsv4q.DSV4QError, match=r"output idx of rerun= \(int64\) has value 4294967297 at index \(0, 1\)"):
        dsv4q.check("topk", {"score": s}, good, k=2, rerun=np.array([[0, 2 ** 32 + 1]], np.int64))
    i = rms_inputs()
    y = dsv4q.oracle.rmsnorm(i["x"], i["w"], eps=1e-6, profile="exact")
    with pytest.raises(dsv4q.DSV4QError, match=r"output y of rerun= has dtype float64: expected float32"):
        dsv4q.check("rmsnorm", i, y.astype(np.float32), "exact", eps=1e-6, rerun=y)
    with pytest.raises(dsv4q.DSV4QError, match=r"rmsnorm gives 1 outputs \(y\), got 2 of rerun="):
        dsv4q.check("rmsnorm", i, y.astype(np.float32), "exact", eps=1e-6, rerun=[y, y])
    c = dsv4q.Case("topk(rows=2,T=64,k=8,recipe=normal,seed=1)")
    run1, _ = c.run_backend("cpu-ref")
    with pytest.raises(dsv4q.DSV4QError, match=r"output idx of rerun= has dtype float32"):
        c.check(run1, rerun=[run1[0].astype(np.float32)])


@pytest.mark.parametrize("bad", [True, "1e-6", None, [1e-6]])
def test_param_must_be_a_number(bad):
    # float(True) is 1.0 and float("1e-6") parses: eps=True ran as eps = 1
    i = rms_inputs()
    with pytest.raises(dsv4q.DSV4QError, match=r"rmsnorm: param eps must be a number \(got %s" % type(bad).__name__):
        dsv4q.oracle.rmsnorm(i["x"], i["w"], eps=bad)
    for ok in (1e-6, 0, np.float32(1e-6), np.int64(0)):     # numbers of any numeric type still run
        dsv4q.oracle.rmsnorm(i["x"], i["w"], eps=ok)
