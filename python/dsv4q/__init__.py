"""dsv4q - the FP64 reference oracle and qualification harness for DeepSeek
V4 kernels, from Python (docs/python.md).

    import dsv4q
    y64 = dsv4q.oracle.rmsnorm(x, w, eps=1e-6)            # FP64 oracle
    v = dsv4q.check("rmsnorm", {"x": x, "w": w}, y, eps=1e-6)
    assert v.passed, v.report()                           # or:
    dsv4q.testing.assert_qualified("rmsnorm", {"x": x, "w": w}, y, eps=1e-6)

Everything runs in libdsv4q.so (ctypes): the oracle, the metric set, the
rounding level (oracle-f32 vs oracle-f64 on the same inputs) and the gates
of `dsv4q qualify`. Nothing is reimplemented in Python.
"""
from ._lib import DSV4QError
from ._ops import METRICS, OPS, Case, Weight, _BF16Codes, check, oracle
from ._verdict import MetricResult, OutputVerdict, Verdict
from . import testing  # noqa: E402

__version__ = "0.1.0"


def bf16_codes(a):
    """Mark a uint16 array (numpy) as BF16 codes, for a kernel output stored in
    BF16 when torch is not at hand (torch.bfloat16 tensors are recognised)."""
    return _BF16Codes(a)


__all__ = ["oracle", "check", "Case", "Weight", "Verdict", "OutputVerdict", "MetricResult", "DSV4QError", "OPS",
           "METRICS", "testing", "bf16_codes"]
