"""``dsv4q.testing.assert_qualified``: the pytest-facing assertion.

Owns: turning a failed ``dsv4q.check`` into an AssertionError whose message
says which output, which metric, value vs level vs bound, and where the
worst element is (the report of dsv4q/_verdict.py), (check() records each verdict for the pytest plugin's receipts).
"""
from __future__ import annotations

from ._ops import check

def assert_qualified(op, inputs, outputs, profile="source", *, msg=None, **kw):
    """Assert that a kernel's ``outputs`` for ``op`` on ``inputs`` pass the
    qualify gates (``dsv4q.check`` with the same arguments). Returns the
    Verdict; raises AssertionError with the full report otherwise."""
    __tracebackhide__ = True   # pytest shows the caller's line, not this frame
    v = check(op, inputs, outputs, profile, **kw)
    if not v.passed:
        text = v.report()
        raise AssertionError((msg + "\n" + text) if msg else text)
    return v
