"""dsv4q.check gives exactly the metrics, bounds and verdict of `dsv4q
qualify` on the same case key (the acceptance test of issue 18).

Independent side: the CLI binary (build/dsv4q qualify --json), a separate
process that builds the case, runs the backend in its isolated child and
judges it. Python side: the case's inputs through the C API, the same
backend run, and dsv4q.check. A mutant makes sure a FAIL verdict is
reproduced too (not only passes).
"""
import json
import math

import pytest

import dsv4q

from conftest import run

CASES = [
    ("cpu-ref", "rmsnorm(rows=4,d=512,recipe=nearzero,seed=1)"),
    ("cpu-ref", "sparse_attn(recipe=masked)"),
    ("cpu-ref", "topk(rows=4,T=4096,k=512,recipe=ties,seed=1)"),
    ("cpu-ref", "hc_pre"),
    ("cpu-ref", "moe_gate"),
    ("mutant:attn_sink_missing", "sparse_attn(recipe=normal)"),
    ("mutant:hc_post_transposed", "hc_post"),
    ("mutant:topk_tie_unstable", "topk(rows=4,T=4096,k=512,recipe=ties,seed=1)"),
]


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a == b or (math.isnan(a) and math.isnan(b))


def qualify_json(dsv4q_bin, backend, key, tmp_path):
    out = tmp_path / "q.json"
    key = dsv4q.Case(key).key   # canonical: a partial --case is a substring/glob filter
    r = run([dsv4q_bin, "qualify", "--backend", backend, "--case", key, "--json", str(out), "--db", str(tmp_path / "q.db")])
    assert r.returncode in (0, 1), r.stderr
    (case,) = json.loads(out.read_text())["cases"]
    return case


@pytest.mark.parametrize("backend,key", CASES)
def test_check_case_equals_qualify(backend, key, dsv4q_bin, tmp_path):
    q = qualify_json(dsv4q_bin, backend, key, tmp_path)
    c = dsv4q.Case(key)
    assert c.key == q["case"]
    r1, r2 = c.run_backend(backend)
    v = c.check(r1, rerun=r2)
    assert v.verdict.lower() == q["verdict"].lower(), v.report()
    assert set(v.rows) == set(q["metrics"])
    for m, row in q["metrics"].items():
        mine = v.rows[m]
        for k in ("output", "value", "level", "bound", "verdict"):
            assert same(mine[k], row[k]), (m, k, mine[k], row[k])
    # per-output ULP histograms as qualify reports them
    for o in q["outputs"]:
        assert v.outputs[o["name"]].ulp_hist == o["ulp_hist"]
        assert v.outputs[o["name"]].dtype == o["dtype"]


@pytest.mark.parametrize("backend,key", [k for k in CASES if not k[1].startswith("moe_gate")])
def test_check_on_given_inputs_equals_qualify(backend, key, dsv4q_bin, tmp_path):
    """dsv4q.check(op, inputs, outputs) on the case's inputs as plain arrays
    (the path a kernel test takes) judges like qualify too."""
    q = qualify_json(dsv4q_bin, backend, key, tmp_path)
    c = dsv4q.Case(key)
    r1, r2 = c.run_backend(backend)
    v = dsv4q.check(c.op, c.inputs, r1, rerun=r2, **c.params)
    assert v.verdict.lower() == q["verdict"].lower(), v.report()
    for m, row in q["metrics"].items():
        for k in ("output", "value", "level", "bound", "verdict"):
            assert same(v.rows[m][k], row[k]), (m, k)


def test_failing_mutant_is_reported_with_location():
    c = dsv4q.Case("sparse_attn(recipe=normal)")
    r1, _ = c.run_backend("mutant:attn_sink_missing")
    v = c.check(r1)
    assert not v.passed and v.verdict == "FAIL"
    names = {m.name for _, m in v.failures()}
    assert "nrms" in names
    w = v.outputs["o"].worst
    assert len(w["coords"]) == 3 and w["candidate"] != w["reference"]


def test_most_ulps_location_matches_the_ulp_max_metric():
    """The reported 'most ULPs' element carries exactly the ulp_max value the
    metric found (counted as qualify counts it: row-floored for sparse_attn)."""
    c = dsv4q.Case("sparse_attn(recipe=normal)")
    r1, _ = c.run_backend("mutant:attn_sink_missing")
    v = c.check(r1)
    u = v.outputs["o"].worst["ulp"]
    assert u["ulps"] == v.outputs["o"].metrics["ulp_max"].value > 0
    assert "most ULPs of o at index" in v.report() or tuple(u["coords"]) == tuple(v.outputs["o"].worst["coords"])


def test_reference_not_finite_is_not_checkable(dsv4q_bin, tmp_path):
    """Issue 29: act_q8_0 on the FP8 extreme linear overflows the Q8_0 F16
    block scale at both oracle widths (tests/test_qualify_ci.c derives it
    from the inputs), so the reference is NaN: dsv4q.check says "not
    checkable" with the reason, as qualify does, never pass."""
    key = "linear(s=2,N=512,K=4096,fmt=fp8,out=bf16,recipe=extreme,seed=1)"
    c = dsv4q.Case(key)
    r1, r2 = c.run_backend("cpu-ref")   # its outputs do not matter: the reference decides
    v = c.check(r1, boundary="act_q8_0=on", rerun=r2)
    assert not v.passed and v.verdict == "not checkable", v.report()
    assert "reference not finite: oracle-f64 has" in v.message
    assert "not checkable: reference not finite" in v.report()
    out = tmp_path / "q.json"
    r = run([dsv4q_bin, "qualify", "--backend", "cpu-ref", "--profile", "source:act_q8_0", "--case", key, "--json",
             str(out), "--db", str(tmp_path / "q.db")])
    assert r.returncode == 1, r.stderr   # no case passed
    (case,) = json.loads(out.read_text())["cases"]
    assert case["verdict"] == "not checkable" and case["message"] == v.message
