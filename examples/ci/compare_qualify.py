#!/usr/bin/env python3
"""Compare two `dsv4q qualify --json` reports (the previous commit's and
this one's) and fail on a regression, so a kernel change that gets worse
without crossing a gate is still seen in review.

usage: compare_qualify.py PREVIOUS.json CURRENT.json [--ratio R]

A regression is, for a case present in both reports and one backend:
  - the verdict went from pass to fail/error, or a passing case vanished
    (skipped now: the backend dropped an operator);
  - a gated metric's value/bound grew by more than R (default 2.0) while
    both are above 1% of the bound (below that it is rounding noise).
Prints one line per regression ("regressed: BACKEND CASE ...") and one per
improvement; exit 0 when there is none, 1 otherwise, 2 on unreadable input.
Standard library only (json), so it runs on any CI image with python3."""
import json
import sys


def load(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        print(f"compare_qualify: {path}: {e}", file=sys.stderr)
        sys.exit(2)
    reports = data if isinstance(data, list) else [data]
    out = {}
    for r in reports:
        for c in r.get("cases", []):
            out[(r.get("backend"), c.get("case"))] = c
    return out


def ratio(m):
    v, b = m.get("value"), m.get("bound")
    if not isinstance(v, (int, float)) or not isinstance(b, (int, float)) or b <= 0:
        return None
    return v / b


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    lim = 2.0
    if "--ratio" in argv:
        lim = float(argv[argv.index("--ratio") + 1])
        args = [a for a in args if a != argv[argv.index("--ratio") + 1]]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    prev, cur = load(args[0]), load(args[1])
    bad = 0
    for key, p in sorted(prev.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        c = cur.get(key)
        name = f"{key[0]} {key[1]}"
        if c is None:
            if p.get("verdict") == "pass":
                print(f"regressed: {name}: passed before, not run now")
                bad += 1
            continue
        pv, cv = p.get("verdict"), c.get("verdict")
        if pv == "pass" and cv != "pass":
            print(f"regressed: {name}: verdict {pv} -> {cv}")
            bad += 1
            continue
        if pv != "pass" and cv == "pass":
            print(f"improved: {name}: verdict {pv} -> {cv}")
        for metric, pm in (p.get("metrics") or {}).items():
            cm = (c.get("metrics") or {}).get(metric)
            if not cm or pm.get("bound") is None:
                continue
            rp, rc = ratio(pm), ratio(cm)
            if rp is None or rc is None or max(rp, rc) < 0.01:
                continue
            if rc > lim * max(rp, 0.01):
                print(f"regressed: {name}: {metric} value/bound {rp:.3g} -> {rc:.3g}")
                bad += 1
    print(f"compare_qualify: {len(prev)} cases before, {len(cur)} now, {bad} regression(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
