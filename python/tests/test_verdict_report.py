"""What a Verdict says beyond pass/fail (issue 28): a FAIL that the declared
profile explains names the profile that fits; a check given no second run
records the rerun metric as "not run", never as a pass; a failure counts
its mismatched elements.

Independent sides: the FP32 kernels are numpy code written here (float32
math, another summation order than the oracle's); the mismatched count is
recomputed in numpy from binary32 ordinals (a float's bits as a signed
magnitude, the usual ULP distance), not read from the library.
"""
import numpy as np

import dsv4q


def rmsnorm_f32(x, w, eps):
    return (w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)))).astype(np.float32)


def sparse_attn_f32(q, kv, idx, sink, scale):
    """kernel.py sparse_attn_kernel in plain float32 (no BF16 probabilities):
    o = sum_c p_c kv[idx_c] / (sum_c p_c + exp(sink - m)) over the live
    columns (idx -1 or >= N masked), m the row max; no live column -> 0."""
    N = kv.shape[0]
    live = (idx >= 0) & (idx < N)
    rows = kv[np.clip(idx, 0, N - 1)]
    sc = np.einsum("shd,scd->shc", q, rows).astype(np.float32) * np.float32(scale)
    sc = np.where(live[:, None, :], sc, np.float32(-np.inf))
    m = np.maximum(sc.max(-1, keepdims=True), sink[None, :, None])
    p = np.exp(sc - m)
    o = np.einsum("shc,scd->shd", p, rows) / (p.sum(-1, keepdims=True) + np.exp(sink[None, :, None] - m))
    return np.where(live.any(-1)[:, None, None], o, 0).astype(np.float32)


def inputs(seed=0):
    r = np.random.default_rng(seed)
    return {"x": r.standard_normal((8, 256)).astype(np.float32), "w": r.standard_normal(256).astype(np.float32)}


def test_fp32_rmsnorm_under_source_fails_with_a_profile_hint():
    i = inputs()
    y = rmsnorm_f32(i["x"], i["w"], 1e-6)
    v = dsv4q.check("rmsnorm", i, y, eps=1e-6)          # default profile: source (BF16 storage of the output)
    assert v.verdict == "FAIL" and v.profile == "source"
    # rmsnorm has no model or qat rounding point: all three give it the FP32 contract
    assert {p["profile"]: p["verdict"] for p in v.other_profiles} == {"model": "pass", "qat": "pass",
                                                                      "exact": "pass"}
    assert dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6).passed   # the hint is true
    msg = v.report()
    assert "hint: this candidate PASSES under profile 'model', 'qat', 'exact'" in msg
    assert "declared profile 'source' may be the reason" in msg and "pass profile='exact'" in msg


def test_fp32_sparse_attn_fits_exact_not_model():
    """model rounds the attention probabilities to BF16 (attn_p_bf16): a plain
    FP32 sparse_attn fails it, and the hint names the profiles that fit."""
    c = dsv4q.Case("sparse_attn(s=2,H=16,D=128,win=32,sel=64,recipe=masked,seed=1)")
    i = {k: getattr(t, "values", t) for k, t in c.inputs.items()}
    o = sparse_attn_f32(i["q"], i["kv"], i["idx"], i["sink"], c.params["scale"])
    assert dsv4q.check("sparse_attn", i, o, "exact", **c.params).passed
    v = dsv4q.check("sparse_attn", i, o, "model", **c.params)
    assert v.verdict == "FAIL"
    assert [p["profile"] for p in v.other_profiles if p["verdict"] == "pass"] == ["qat", "exact"]
    assert "PASSES under profile 'qat', 'exact'" in v.report() and "pass profile='exact'" in v.report()


def test_a_real_defect_gets_no_profile_hint():
    i = inputs()
    y = rmsnorm_f32(i["x"], i["w"], 1e-6)
    y[:, ::2] *= 1.5                                   # wrong under every profile
    v = dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6)
    assert v.verdict == "FAIL"
    assert all(p["verdict"] == "FAIL" for p in v.other_profiles) and len(v.other_profiles) == 3
    assert "hint:" not in v.report()


def test_no_rerun_is_not_run_not_pass():
    i = inputs()
    y = rmsnorm_f32(i["x"], i["w"], 1e-6)
    v = dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6)
    assert v.passed                                    # the verdict itself does not need a rerun
    assert v.rows["rerun"]["verdict"] == "not run" and v.rows["rerun"]["value"] is None
    m = v.outputs["y"].metrics["rerun"]
    assert m.run is False and m.passed is None and m.status == "not run"
    assert "rerun" in v.report() and "not run (no rerun= given)" in v.report()
    # the JSON a receipt / the JUnit rows record (pytest plugin: v.json)
    assert v.json["metrics"]["rerun"]["verdict"] != "pass"
    # with a second run it is measured: a bitwise-equal rerun passes, a different one fails
    assert dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6, rerun=y.copy()).rows["rerun"]["verdict"] == "pass"
    y2 = y.copy()
    y2[0, 0] = np.nextafter(y2[0, 0], np.float32(np.inf))
    v2 = dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6, rerun=y2)
    assert v2.rows["rerun"]["verdict"] == "fail" and not v2.passed


def f32_ulps(a, b):
    """|ordinal(a) - ordinal(b)| of binary32 values (ordinal: the bits as a
    signed magnitude, so adjacent floats differ by 1 across zero too)."""
    def ordinal(v):
        u = np.asarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(u < 0, -(u & 0x7FFFFFFF), u)
    return np.abs(ordinal(a) - ordinal(b))


def test_failure_counts_mismatched_elements():
    i = inputs()
    y = rmsnorm_f32(i["x"], i["w"], 1e-6)
    bad = [(0, 3), (1, 100), (2, 7), (5, 17), (7, 255)]
    for r, k in bad:                                  # far off: 1.5x
        y[r, k] *= np.float32(1.5)
    for k in range(7):                                # 3 ulps off: inside any bound of >= 14 ulps
        y[4, k] = np.nextafter(np.nextafter(np.nextafter(y[4, k], np.inf), np.inf), np.inf)
    v = dsv4q.check("rmsnorm", i, y, "exact", eps=1e-6)
    assert v.verdict == "FAIL"
    o = v.outputs["y"]
    bound = o.metrics["ulp_max"].bound
    assert bound >= 14
    ref = dsv4q.oracle.rmsnorm(i["x"], i["w"], eps=1e-6, profile="exact")
    want = int((f32_ulps(y, ref.astype(np.float32)) > bound).sum())
    assert want == len(bad)                           # by hand: the five 1.5x elements
    assert o.mismatched["count"] == want and o.mismatched["n"] == 2048
    assert "mismatched elements of y: 5 / 2048 (0.244%): elements more than " in v.report()
    assert "F32 ulps from the reference (the ulp_max bound)" in v.report()


def test_selection_mismatch_counts_flips():
    s = np.array([[5.0, 4.0, 3.0, 2.0, 1.0, 0.0]], np.float32)
    v = dsv4q.check("topk", {"score": s}, np.array([[0, 1, 5]], np.int32), k=3)   # reference {0, 1, 2}
    assert v.verdict == "FAIL"
    mm = v.outputs["idx"].mismatched
    assert mm["count"] == 1 and mm["n"] == 3 and "flips" in mm["what"]
    assert "mismatched elements of idx: 1 / 3" in v.report()
