#!/usr/bin/env python3
"""Read a `dsv4q qualify --junit` report with junitparser (PyPI), the JUnit
reader used by CI report tools, and check it against what the caller
expects -- independently of dsv4q's own writer.

usage: check_junit.py FILE CASES FAIL_OPS [MIN_FAILURES]
  CASES       number of testcases the report must hold (one per case key)
  FAIL_OPS    comma-separated operators whose cases may fail ("-": none)
  MIN_FAILURES  at least this many failures (default 0)
Exit 0 when every check holds, 1 with the reason otherwise."""
import sys
from junitparser import JUnitXml, Failure, Error, Skipped


def main():
    path, ncases, fail_ops = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    min_fail = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    allowed = set() if fail_ops == "-" else set(fail_ops.split(","))
    xml = JUnitXml.fromfile(path)
    cases, failed = [], []
    for suite in xml:
        for case in suite:
            cases.append(case)
            for r in case.result:
                if isinstance(r, (Failure, Error)):
                    failed.append((case, r))
    if len(cases) != ncases:
        sys.exit(f"{path}: {len(cases)} testcases, expected {ncases}")
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        sys.exit(f"{path}: duplicate testcase names")
    if len(failed) < min_fail:
        sys.exit(f"{path}: {len(failed)} failures, expected at least {min_fail}")
    for case, r in failed:
        op = case.name.split("(")[0]
        if op not in allowed:
            sys.exit(f"{path}: unexpected failure of {case.name}: {r.message}")
        # the message names the failing metric, its value, bound and level
        if isinstance(r, Failure) and not (" > bound " in r.message and "(level " in r.message):
            sys.exit(f"{path}: failure message lacks value/bound/level: {r.message!r}")
    print(f"{path}: {len(cases)} testcases, {len(failed)} failing: "
          + ", ".join(sorted({c.name for c, _ in failed})))


if __name__ == "__main__":
    main()
