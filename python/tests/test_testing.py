"""dsv4q.testing.assert_qualified: passes an honest kernel, and a defect
fails with a message naming the output, the metric, value vs level vs
bound, and the worst element (as torch.testing.assert_close does)."""
import re

import numpy as np
import pytest

import dsv4q
from dsv4q.testing import assert_qualified


def rmsnorm_f32(x, w, eps):
    x = x.astype(np.float32)
    return (w * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)))).astype(np.float32)


def inputs(seed=0):
    r = np.random.default_rng(seed)
    return {"x": r.standard_normal((8, 256)).astype(np.float32), "w": r.standard_normal(256).astype(np.float32)}


def test_honest_fp32_kernel_passes_under_model_profile():
    i = inputs()
    v = assert_qualified("rmsnorm", i, rmsnorm_f32(i["x"], i["w"], 1e-6), "model", eps=1e-6)
    assert v.passed and v.outputs["y"].metrics["nrms"].bound > 0


def test_defect_message_is_readable():
    i = inputs()
    y = rmsnorm_f32(i["x"], i["w"], 1e-6)
    y[5, 17] *= 1.5                                  # one corrupted element
    with pytest.raises(AssertionError) as e:
        assert_qualified("rmsnorm", i, y, "model", eps=1e-6)
    msg = str(e.value)
    assert "dsv4q rmsnorm: FAIL" in msg
    assert re.search(r"output y \(F32, shape \[8, 256\]\): nrms = [0-9.e+-]+ > bound [0-9.e+-]+ +\(level ", msg)
    assert "worst element of y at index (5, 17)" in msg
    assert "profile model" in msg


def test_bf16_output_ulps_counted_in_bf16(torch):
    i = inputs()
    y = torch.from_numpy(dsv4q.oracle.rmsnorm(i["x"], i["w"], eps=1e-6, width="f32")).to(torch.bfloat16)
    v = dsv4q.check("rmsnorm", i, y, eps=1e-6)
    assert v.passed, v.report()
    assert v.outputs["y"].dtype == "BF16"
