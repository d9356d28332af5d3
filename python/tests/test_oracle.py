"""dsv4q.oracle.<op>: every ABI operator callable, numbers against hand
computation, both widths, and clear errors for bad calls.

Hand values: RMSNorm of x = [3, 4] with w = [1, 2], eps = 0 (exact profile:
no BF16 storage rounding) is [3, 8] / sqrt(12.5); the Walsh-Hadamard
transform of [a, b] (n = 2, scaled by n^-1/2) is [(a+b), (a-b)] / sqrt(2);
sparse attention with one unmasked column returns that key row (softmax
of one score is 1, and the sink adds exp(sink - m) to the denominator:
with sink = -inf it adds nothing).
"""
import math

import numpy as np
import pytest

import dsv4q


def abi_operator_names():
    """The operator names of DSV4Q_OP_LIST, read from the ABI header of the
    tree (the list scripts/gen-ops.sh writes), in enum order."""
    import os, re
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "abi", "dsv4q_backend.h")) as f:
        text = f.read()
    block = text[text.index("#define DSV4Q_OP_LIST(X)"):text.index("/* end generated */")]
    return re.findall(r"X\(\w+, (\w+), \d+, \d+, \d+\)", block)


def test_every_abi_operator_is_exposed():
    assert list(dsv4q.OPS) == abi_operator_names()
    for name in dsv4q.OPS:
        f = getattr(dsv4q.oracle, name)
        assert name in f.__doc__ and "Inputs:" in f.__doc__


def test_rmsnorm_hand_value_both_widths():
    x = np.array([[3, 4]], np.float32)
    w = np.array([1, 2], np.float32)
    want = np.array([[3, 8]]) / math.sqrt(12.5)
    y64 = dsv4q.oracle.rmsnorm(x, w, eps=0.0, profile="exact")
    assert y64.dtype == np.float64 and np.allclose(y64, want, rtol=0, atol=1e-15)
    y32 = dsv4q.oracle.rmsnorm(x, w, eps=0.0, profile="exact", width="f32")
    assert y32.dtype == np.float32 and np.allclose(y32, want, rtol=0, atol=1e-6)
    # source profile: the output is stored in BF16 (norm_bf16): 0.8485... -> 0.84765625
    ys = dsv4q.oracle.rmsnorm(x, w, eps=0.0)
    assert ys[0, 0] == 0.84765625


def test_boundary_deviation_changes_the_reference():
    x = np.array([[3, 4]], np.float32)
    w = np.array([1, 2], np.float32)
    y = dsv4q.oracle.rmsnorm(x, w, eps=0.0, boundary="norm_bf16=off")
    assert abs(y[0, 0] - 3 / math.sqrt(12.5)) < 1e-15


def test_hadamard_hand_value():
    y = dsv4q.oracle.hadamard(np.array([[1.0, 3.0]], np.float32), profile="exact")
    assert np.allclose(y, [[4 / math.sqrt(2), -2 / math.sqrt(2)]], rtol=0, atol=1e-15)


def test_sparse_attn_single_column_returns_the_row():
    H, D = 2, 4
    q = np.ones((1, H, D), np.float32)
    kv = np.arange(3 * D, dtype=np.float32).reshape(3, D) / 8
    idx = np.array([[1, -1, 7]], np.int32)     # one live column; -1 and >= N are masked
    sink = np.full(H, -np.inf, np.float32)
    o = dsv4q.oracle.sparse_attn(q, kv, idx, sink, scale=D ** -0.5, profile="exact")
    assert o.shape == (1, H, D)
    assert np.array_equal(o[0, 0], kv[1]) and np.array_equal(o[0, 1], kv[1])


def test_topk_selection_and_int_outputs():
    s = np.array([[0.5, 2.0, -1.0, 3.0]], np.float32)
    idx = dsv4q.oracle.topk(s, k=2)
    assert idx.dtype == np.int32 and sorted(idx[0].tolist()) == [1, 3]


def test_torch_tensors_are_read_without_a_copy(torch):
    from dsv4q._lib import as_array
    t = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    a, _ = as_array(t, "x", "f32")
    assert np.shares_memory(a, t.numpy())
    y = dsv4q.oracle.hadamard(t, profile="exact")
    assert y.shape == (2, 4)


@pytest.mark.parametrize("call,msg", [
    (lambda: dsv4q.oracle.rmsnorm(np.ones((2, 4), np.float32), np.ones(3, np.float32), eps=1e-6),
     "rmsnorm: input w has shape [3], expected [d]: d = 4"),
    (lambda: dsv4q.oracle.rmsnorm(np.ones((2, 4), np.float32), np.ones(4, np.float32)), "missing param eps"),
    (lambda: dsv4q.oracle.hadamard(np.ones((2, 6), np.float32)), "n = 6 must be a power of two"),
    (lambda: dsv4q.oracle.linear(np.ones((2, 8), np.float32), np.ones((3, 9), np.float32), ue8m0=1, bf16_out=0),
     "input w has shape [3,9], expected [N,K]: K = 8"),
    (lambda: dsv4q.oracle.rope(np.ones((2, 4), np.float32), np.zeros(2, np.float32), base=1e4, original_seq_len=0,
                               factor=1, beta_fast=32, beta_slow=1, inverse=0), "input pos must be an integer array"),
    (lambda: dsv4q.oracle.rmsnorm(np.ones((2, 4), np.float32), np.ones(4, np.float32), eps=1e-6, width="f16"),
     "width must be 'f64' or 'f32'"),
    (lambda: dsv4q.oracle.rmsnorm(np.ones((2, 4), np.float32), np.ones(4, np.float32), eps=1e-6, profile="fast"),
     "unknown profile 'fast'"),
    (lambda: dsv4q.check("nope", {}, []), "unknown operator 'nope'"),
])
def test_bad_calls_raise_clear_errors(call, msg):
    with pytest.raises(dsv4q.DSV4QError) as e:
        call()
    assert msg in str(e.value)


def test_raw_fp8_weight_runs_the_fp8_gemm():
    """A Weight with its F8_E4M3 bytes: the oracle uses the stored form, as the
    case builder's raw weights do (same result as the case's own inputs)."""
    c = dsv4q.Case("linear(s=2,N=1024,K=4096,fmt=fp8,out=bf16,recipe=normal,seed=1)")
    w = c.inputs["w"]
    assert isinstance(w, dsv4q.Weight) and w.fmt == "fp8" and w.scale.shape == (8, 32)
    y_raw = dsv4q.oracle.linear(c.inputs["x"], w, **c.params)
    y_dec = dsv4q.oracle.linear(c.inputs["x"], w.values, **c.params)
    assert y_raw.shape == (2, 1024)
    # the FP8 path quantizes the activation (gemm_act_fp8); the F32 path does not
    assert not np.array_equal(y_raw, y_dec)
    bad = dsv4q.Weight(w.values, raw=w.raw, fmt="fp8", scale=w.scale[:, :31])
    with pytest.raises(dsv4q.DSV4QError, match="scale"):
        dsv4q.oracle.linear(c.inputs["x"], bad, **c.params)


def test_raw_fp8_block32_weight_is_accepted():
    """V4.1's FP8 weights carry 32x32 scale blocks: a case's own inputs
    passed back give the case's reference (they were refused as 'raw form
    does not match' when only 128-blocks were accepted)."""
    c = dsv4q.Case("linear(s=2,N=1280,K=5120,fmt=fp8b32,out=bf16,recipe=normal,seed=1)")
    w = c.inputs["w"]
    assert isinstance(w, dsv4q.Weight) and w.scale.shape == (40, 160)
    y = dsv4q.oracle.linear(c.inputs["x"], w, **c.params)
    assert y.shape == (2, 1280)
    bad = dsv4q.Weight(w.values, raw=w.raw, fmt="fp8", scale=w.scale[:, :159])
    with pytest.raises(dsv4q.DSV4QError, match="32x32"):
        dsv4q.oracle.linear(c.inputs["x"], bad, **c.params)


def test_raw_weight_with_the_wrong_code_dtype_is_refused():
    c = dsv4q.Case("linear(s=2,N=1024,K=4096,fmt=fp8,out=bf16,recipe=normal,seed=1)")
    w = c.inputs["w"]
    for bad, what in [(dsv4q.Weight(w.values, raw=w.raw.astype(np.uint16), fmt="fp8", scale=w.scale), "raw data"),
                      (dsv4q.Weight(w.values, raw=w.raw, fmt="fp8", scale=w.scale.astype(np.float32)), "scale")]:
        with pytest.raises(dsv4q.DSV4QError, match=what):
            dsv4q.oracle.linear(c.inputs["x"], bad, **c.params)


def test_bf16_torch_inputs_are_widened_exactly(torch):
    x = torch.tensor([[3.0, 4.0]]).to(torch.bfloat16)
    w = torch.tensor([1.0, 2.0]).to(torch.bfloat16)
    y = dsv4q.oracle.rmsnorm(x, w, eps=0.0, profile="exact")
    assert np.allclose(y, np.array([[3, 8]]) / math.sqrt(12.5), rtol=0, atol=1e-15)


def test_empty_and_nonfinite_inputs_do_not_crash():
    y = dsv4q.oracle.rmsnorm(np.zeros((0, 4), np.float32), np.ones(4, np.float32), eps=1e-6)
    assert y.shape == (0, 4)
    x = np.ones((2, 4), np.float32)
    y = dsv4q.oracle.rmsnorm(x, np.ones(4, np.float32), eps=1e-6, width="f32")
    y[1, 2] = np.nan
    v = dsv4q.check("rmsnorm", {"x": x, "w": np.ones(4, np.float32)}, y, eps=1e-6)
    assert not v.passed and v.outputs["y"].metrics["nonfinite"].value == 1
    assert "worst element of y at index (1, 2)" in v.report()


def test_hc_pre_docs_define_pre_post_comb():
    """help(dsv4q.oracle.hc_pre) (the operator table, also docs/backends.md)
    defines pre, post and comb; the post formula it gives, ported to numpy
    here, is what the oracle returns."""
    doc = dsv4q.oracle.hc_pre.__doc__
    assert "pre_j = sigmoid(mix_j scale0 + base_j) + hc_eps" in doc
    assert "post_j = 2 sigmoid(mix_{hc+j} scale1 + base_{hc+j})" in doc
    assert "C[j][k], j = source stream" in doc and "split into pre (first hc), post (next hc) and comb" in doc
    c = dsv4q.Case("hc_pre(s=2,hc=4,d=64,recipe=normal,seed=1)")
    i = {k: getattr(v, "values", v) for k, v in c.inputs.items()}
    p = c.params
    y, post, comb = dsv4q.oracle.hc_pre(**i, **p, profile="exact")
    X = i["X"].astype(np.float64).reshape(2, -1)
    mix = (X @ i["fn"].astype(np.float64).T) / np.sqrt(np.mean(X * X, axis=1, keepdims=True) + p["norm_eps"])
    hc = 4
    want = 2 / (1 + np.exp(-(mix[:, hc:2 * hc] * i["scale"][1] + i["base"][hc:2 * hc])))
    assert post.shape == (2, hc) and comb.shape == (2, hc, hc)
    assert np.allclose(post, want, rtol=1e-12, atol=0)
    assert np.allclose(comb.sum(axis=1), 1, atol=1e-5)     # doubly stochastic (Sinkhorn ends on columns)
