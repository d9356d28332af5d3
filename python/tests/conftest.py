"""Shared fixtures of the dsv4q Python tests.

torch: the tests that need it (the example's PyTorch kernels, the importer
tests that write .pt dumps) use the ``torch`` fixture. Where torch is not
installed they are SKIPPED WITH A REASON, except when DSV4Q_REQUIRE_TORCH=1
(tests/pytest_check.sh sets it in CI), where a missing torch FAILS them: CI
must never pass by skipping.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def torch():
    try:
        import torch as t
    except ImportError as e:
        if os.environ.get("DSV4Q_REQUIRE_TORCH") == "1":
            pytest.fail("torch is required here (DSV4Q_REQUIRE_TORCH=1) but cannot be imported: %s" % e)
        pytest.skip("torch is not installed (pip install torch): PyTorch parts not run")
    return t


@pytest.fixture(scope="session")
def dsv4q_bin():
    b = Path(os.environ.get("DSV4Q_BIN", ROOT / "build" / "dsv4q"))
    if not b.exists():
        pytest.fail("%s not found: build the CLI (make) or set DSV4Q_BIN" % b)
    return str(b)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory, dsv4q_bin):
    """The synthesized `tiny` checkpoint (dsv4q synth)."""
    d = tmp_path_factory.mktemp("tiny") / "tiny"
    r = run([dsv4q_bin, "synth", "--config", "tiny", "--out", str(d)])
    assert r.returncode == 0, r.stderr
    return d
