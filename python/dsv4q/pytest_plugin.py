"""pytest plugin (registered as ``dsv4q`` through the pytest11 entry point).

Options:
  --dsv4q-receipts DB   one signed, hash-chained receipt per test that made
                        a dsv4q check (dsv4q/receipts.py; kind "qualify"):
                        the test's node id, outcome and the full verdict of
                        every dsv4q.check / assert_qualified it made; verdict
                        pass (passed, xpassed), fail (also a strict
                        xpass), info (xfailed) or error (a failing setup
                        or teardown, as pytest counts it). Tests
                        without a check and skipped tests get none.
  --dsv4q-key PATH      signing key for those receipts (default: the dsv4q
                        default key; "" = unsigned)
  --dsv4q-junit FILE    JUnit XML with one <testcase> per test; each dsv4q
                        verdict is a set of <property> rows (op, output,
                        metric, value, level, bound) and a failure carries
                        the verdict's report as its text

Owns: collecting the verdicts a test made (dsv4q._ops.take_recorded) and
writing them out. dsv4q itself is imported only when an option is given,
so installing the package never breaks an unrelated pytest run.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

import pytest


def pytest_addoption(parser):
    g = parser.getgroup("dsv4q", "dsv4q qualification receipts")
    g.addoption("--dsv4q-receipts", metavar="DB", default=None, help="store a signed dsv4q receipt per test in DB")
    g.addoption("--dsv4q-key", metavar="PATH", default=None, help="signing key for --dsv4q-receipts")
    g.addoption("--dsv4q-junit", metavar="FILE", default=None, help="write a JUnit XML of dsv4q verdicts")


class _State:
    def __init__(self, config):
        self.db = config.getoption("--dsv4q-receipts")
        self.key = config.getoption("--dsv4q-key")
        self.junit = config.getoption("--dsv4q-junit")
        self.cases = []       # (nodeid, outcome, [verdict json], longrepr, seconds)
        self.outcome = {}
        self.errors = []


def pytest_configure(config):
    if config.getoption("--dsv4q-receipts") or config.getoption("--dsv4q-junit"):
        config._dsv4q = _State(config)


def _state(item_or_config):
    cfg = getattr(item_or_config, "config", item_or_config)
    return getattr(cfg, "_dsv4q", None)


def pytest_runtest_setup(item):
    if _state(item):
        from . import _ops
        _ops.take_recorded()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Record the outcome pytest itself reports (after the xfail plugin has
    rewritten it): an expected failure is "xfailed", an unexpected pass
    "xpassed" (a strict one "failed"), a failing setup/teardown "error"."""
    res = yield
    st = _state(item)
    if not st:
        return
    rep = res.get_result()
    rec = st.outcome.setdefault(item.nodeid, {"outcome": "passed", "longrepr": "", "seconds": 0.0})
    rec["seconds"] += call.duration
    xfail = hasattr(rep, "wasxfail")
    if rep.skipped:
        if xfail:
            rec["outcome"], rec["longrepr"] = "xfailed", rep.wasxfail or ""
        elif rec["outcome"] == "passed":
            rec["outcome"] = "skipped"
    elif rep.failed:
        # a failing setup or teardown is an error, as pytest counts it; after
        # a failed call the failure stays (pytest reports both)
        if call.when == "call" or rec["outcome"] != "failed":
            rec["outcome"] = "failed" if call.when == "call" else "error"
            rec["longrepr"] = str(call.excinfo.value) if call.excinfo is not None else rep.longreprtext
    elif call.when == "call" and xfail:
        rec["outcome"] = "xpassed"


def _finish(item):
    st = _state(item)
    if not st:
        return
    from . import _ops, receipts
    verdicts = [v.json for v in _ops.take_recorded()]
    rec = st.outcome.get(item.nodeid, {"outcome": "passed", "longrepr": "", "seconds": 0.0})
    st.cases.append((item.nodeid, rec["outcome"], verdicts, rec["longrepr"], rec["seconds"]))
    # A receipt records dsv4q verdicts: a test that made no dsv4q check
    # qualified nothing and gets none (a "pass" would certify nothing). An
    # expected failure (xfail) is "info": pytest does not count it as a
    # failure, and it is no pass either; an unexpected pass (non-strict
    # xpass) is a pass, as pytest counts it.
    if st.db and verdicts and rec["outcome"] != "skipped":
        verdict = {"passed": "pass", "xpassed": "pass", "failed": "fail", "xfailed": "info"}.get(rec["outcome"],
                                                                                              "error")
        gates = sorted({v["gates"] for v in verdicts})
        profiles = sorted({v["profile"] for v in verdicts})
        try:
            receipts.write(st.db, kind="qualify", verdict=verdict, key=st.key,
                           metrics=_clean({"test": item.nodeid, "outcome": rec["outcome"], "checks": verdicts}),
                           command_line="pytest " + item.nodeid, backend_id="pytest:" + item.nodeid,
                           profile=",".join(profiles) or None, widths="f64,f32",
                           gate_file=gates[0] if len(gates) == 1 and os.path.exists(gates[0]) else None)
        except Exception as e:   # a receipt failure must be visible, not silent
            st.errors.append("%s: %s" % (item.nodeid, e))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After the item's last report: the teardown's report is made after
    pytest_runtest_teardown returns, so a fixture that fails in teardown
    (pytest: "1 passed, 1 error") is an error here too, not a pass."""
    yield
    _finish(item)


def _clean(o):
    """JSON-safe copy (NaN/inf as strings: receipts reject non-finite numbers)."""
    if isinstance(o, float) and not math.isfinite(o):
        return "nan" if math.isnan(o) else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_clean(v) for v in o]
    return o


def pytest_sessionfinish(session, exitstatus):
    st = _state(session.config)
    if not st:
        return
    if st.junit:
        suite = ET.Element("testsuite", name="dsv4q", tests=str(len(st.cases)),
                           failures=str(sum(c[1] == "failed" for c in st.cases)),
                           errors=str(sum(c[1] == "error" for c in st.cases)),
                           skipped=str(sum(c[1] in ("skipped", "xfailed") for c in st.cases)))
        for nodeid, outcome, verdicts, longrepr, secs in st.cases:
            mod, _, name = nodeid.rpartition("::")
            tc = ET.SubElement(suite, "testcase", classname=mod.replace("/", ".").removesuffix(".py"), name=name,
                               time="%.3f" % secs)
            props = ET.SubElement(tc, "properties")
            for i, v in enumerate(verdicts):
                ET.SubElement(props, "property", name="dsv4q.%d.op" % i, value=v["op"])
                ET.SubElement(props, "property", name="dsv4q.%d.verdict" % i, value=v["verdict"])
                for m, r in sorted(v.get("metrics", {}).items()):
                    ET.SubElement(props, "property", name="dsv4q.%d.%s" % (i, m),
                                  value="output=%s value=%s level=%s bound=%s %s" % (
                                      r["output"], r["value"], r["level"], r["bound"], r["verdict"]))
            if outcome == "failed":
                ET.SubElement(tc, "failure", message=longrepr.splitlines()[0] if longrepr else "failed").text = longrepr
            elif outcome == "error":
                ET.SubElement(tc, "error", message=longrepr.splitlines()[0] if longrepr else "error").text = longrepr
            elif outcome == "skipped":
                ET.SubElement(tc, "skipped")
            elif outcome == "xfailed":   # as pytest's own --junitxml writes an xfail
                ET.SubElement(tc, "skipped", type="pytest.xfail", message=longrepr or "expected failure")
        ET.ElementTree(suite).write(st.junit, encoding="utf-8", xml_declaration=True)
    if st.errors:
        session.config.get_terminal_writer().line("dsv4q: receipts NOT written for %d test(s):" % len(st.errors),
                                                  red=True)
        for e in st.errors:
            session.config.get_terminal_writer().line("  " + e, red=True)
        session.exitstatus = 1
