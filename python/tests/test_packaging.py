"""The installed package as a user gets it (tests/pytest_check.sh installs
./python into a venv): a platform wheel, the torch extra, the library's
own build commit in receipts, verification without the dsv4q binary, and
an install that refuses to succeed without the library."""
import importlib.metadata
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import dsv4q
import dsv4q.receipts

from conftest import ROOT, run


def _dist():
    try:
        return importlib.metadata.distribution("dsv4q")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("dsv4q is not installed (run through tests/pytest_check.sh)")


def test_wheel_is_a_platform_wheel():
    # it carries libdsv4q.so (x86-64 / aarch64 machine code): py3-none-any would
    # let pip put it on any machine
    wheel = _dist().read_text("WHEEL")
    tags = [l.split(":", 1)[1].strip() for l in wheel.splitlines() if l.startswith("Tag:")]
    assert tags and all(t.startswith("py3-none-") and not t.endswith("-any") for t in tags), wheel
    assert "Root-Is-Purelib: false" in wheel


def test_torch_extra_brings_safetensors():
    reqs = _dist().requires or []
    torch_reqs = {r.split(";")[0].strip() for r in reqs if 'extra == "torch"' in r}
    assert {"torch", "safetensors"} <= torch_reqs, reqs


def test_receipt_names_the_library_build_commit(tmp_path):
    top = run(["git", "-C", str(ROOT), "rev-parse", "--show-toplevel"])
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() != ROOT.resolve():
        want = "unknown"
    else:
        want = run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]).stdout.strip()
    db = tmp_path / "r.db"
    # a fresh interpreter without the override: the commit is resolved once per process
    env = {k: v for k, v in os.environ.items() if k != "DSV4Q_GIT_COMMIT"}
    code = "import sys, dsv4q.receipts as r; r.write(sys.argv[1], verdict='info', metrics={}, key='')"
    p = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    got = sqlite3.connect(str(db)).execute("SELECT git_commit FROM receipts").fetchone()[0]
    assert got == want, "receipt records commit %r, the tree is at %r (rebuild with make?)" % (got, want)


def _signed_and_unsigned(tmp_path, dsv4q_bin):
    key = tmp_path / "k" / "signing.key"
    assert run([dsv4q_bin, "keygen", "--out", str(key)]).returncode == 0
    signed, unsigned = tmp_path / "s.db", tmp_path / "u.db"
    for i in range(2):
        dsv4q.receipts.write(str(signed), verdict="pass", metrics={"i": i}, key=str(key))
        dsv4q.receipts.write(str(unsigned), verdict="pass", metrics={"i": i}, key="")
    return key, signed, unsigned


def test_verify_from_python(tmp_path, dsv4q_bin, monkeypatch):
    monkeypatch.setenv("DSV4Q_KEY", str(tmp_path / "no-default.key"))   # no default key
    key, signed, unsigned = _signed_and_unsigned(tmp_path, dsv4q_bin)
    r = dsv4q.receipts.verify(signed, pubkey=str(key) + ".pub")
    assert r.ok and r.status == "OK" and r.checked == 2 and r.signatures_valid == 2, r.report
    # unsigned: nothing shows who wrote them
    r = dsv4q.receipts.verify(unsigned)
    assert not r and r.status == "NOT VERIFIED" and r.unsigned == 2 and r.problems == 0, r.report
    assert "--allow-unsigned" in r.report
    assert dsv4q.receipts.verify(unsigned, allow_unsigned=True).status == "OK"
    assert dsv4q.receipts.verify(unsigned, pubkey=str(key) + ".pub").status == "FAILED"
    # signed, but no key given and no default key: the signatures prove nothing here
    r = dsv4q.receipts.verify(signed)
    assert r.status == "NOT VERIFIED" and r.not_checked == 2 and r.signatures_valid == 0, r.report
    # the Python verifier agrees with the CLI's on a tampered database
    con = sqlite3.connect(str(signed))
    con.execute("UPDATE receipts SET verdict = 'fail' WHERE id = 2")
    con.commit()
    r = dsv4q.receipts.verify(signed, pubkey=str(key) + ".pub")
    assert r.status == "FAILED" and "receipt 2: hash mismatch" in r.report
    with pytest.raises(dsv4q.DSV4QError, match="no receipt 9"):
        dsv4q.receipts.verify(unsigned, id=9)


def test_receipts_console_script(tmp_path, dsv4q_bin):
    exe = Path(sysconfig.get_path("scripts")) / "dsv4q-receipts"
    if not exe.exists():
        if "dsv4q-receipts" not in {e.name for e in _dist().entry_points}:
            pytest.fail("the installed package has no dsv4q-receipts console script")
        pytest.skip("dsv4q-receipts is not in this interpreter's scripts directory")
    env = dict(os.environ, DSV4Q_KEY=str(tmp_path / "no-default.key"))
    key, signed, unsigned = _signed_and_unsigned(tmp_path, dsv4q_bin)
    v = lambda *a: subprocess.run([str(exe), "verify", *a], capture_output=True, text=True, env=env, timeout=60)
    p = v("--db", str(unsigned))
    assert p.returncode == 1 and "NOT VERIFIED: 2 receipt(s) checked" in p.stdout, p.stdout + p.stderr
    assert v("--allow-unsigned", "--db", str(unsigned)).returncode == 0
    assert v("--all", "--pubkey", str(key) + ".pub", "--db", str(signed)).returncode == 0
    assert v("--pubkey", str(key) + ".pub", "--db", str(unsigned)).returncode == 1
    p = v("--db", str(tmp_path / "missing" / "x.db"))
    assert p.returncode == 2 and "x.db" in p.stderr


def test_install_without_library_fails(tmp_path):
    # a copy of python/ with no ../build/libdsv4q.so beside it
    src = tmp_path / "tree" / "python"
    shutil.copytree(ROOT / "python", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "DSV4Q_LIB"}
    try:
        import setuptools  # noqa: F401
        cmd = [sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "out")]
    except ImportError:   # no setuptools here: pip's isolated build
        cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "out"), str(src)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=src, env=env, timeout=300)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "libdsv4q.so not found" in p.stderr + p.stdout and "`make`" in p.stderr + p.stdout, p.stderr
    assert not (tmp_path / "out" / "dsv4q" / "__init__.py").exists()
