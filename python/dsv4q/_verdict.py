"""The verdict of ``dsv4q.check``: every metric, level, bound and pass/fail
per output, as the C side computed them (cli/capi.c check_core JSON).

Owns: the Python view of that JSON and its human-readable report (the
message ``dsv4q.testing.assert_qualified`` raises). Nothing is recomputed.

JSON fields: op, case, profile, boundary, gates, verdict ("pass" | "FAIL" |
"ERROR" | "not checkable"), message (ERROR, and not checkable: where the
reference is not finite), outputs [{name, dtype, shape, n, metrics
{metric: {value, level, bound (null when not gated), gated, pass}},
ulp_hist, tie_flips, worst {index, coords, candidate, reference} or {row,
candidate, reference} for selections, mismatched {count, n, what} (absent
for moe_gate's weights)}], metrics {metric: {output, value, level, bound,
verdict}} (qualify's rows: per metric the output that is worst relative to
its bound), ulp_buckets; other_profiles (FAIL only) [{profile, verdict,
metric, output, value, bound}]: the same candidate judged under each other
profile. The rerun metric of a check given no second run has run false,
value/level/bound/pass null, and its row's verdict is "not run".
"""
from __future__ import annotations


def _num(v):
    if v == "inf":
        return float("inf")
    if v == "-inf":
        return float("-inf")
    return float("nan") if v is None else v


class MetricResult:
    """One metric of one output: value (candidate vs oracle-f64), level
    (oracle-f32 vs oracle-f64), bound (None when not gated), passed (None
    when not run), run (False for rerun when check() got no ``rerun=``),
    status ("pass", "FAIL", "info" or "not run")."""

    def __init__(self, name, d):
        self.name = name
        self.run = d.get("run", True)
        self.value, self.level = _num(d["value"]), _num(d["level"])
        self.bound = None if d["bound"] is None else _num(d["bound"])
        self.gated = bool(d["gated"])
        self.passed = bool(d["pass"]) if self.run else None

    @property
    def status(self):
        return "not run" if not self.run else "info" if not self.gated else "pass" if self.passed else "FAIL"

    def __repr__(self):
        if not self.run:
            return "%s: not run" % self.name
        b = "-" if self.bound is None else "%.3e" % self.bound
        return "%s: value %.3e, level %.3e, bound %s (%s)" % (self.name, self.value, self.level, b, self.status)


class OutputVerdict:
    """One output: name, dtype (storage: "F32", "BF16", "F16", "I32"), shape,
    n, metrics {name: MetricResult}, ulp_hist (counts per bucket of the
    verdict's ulp_buckets), tie_flips, worst (where the candidate is worst:
    see the module doc), mismatched ({count, n, what} or None)."""

    def __init__(self, d):
        self.name, self.dtype, self.shape, self.n = d["name"], d["dtype"], tuple(d["shape"]), d["n"]
        self.metrics = {k: MetricResult(k, v) for k, v in d["metrics"].items()}
        self.ulp_hist, self.tie_flips, self.worst = d["ulp_hist"], d["tie_flips"], d["worst"]
        self.mismatched = d.get("mismatched")

    @property
    def passed(self):
        return all(m.passed for m in self.metrics.values() if m.run)

    def failures(self):
        return [m for m in self.metrics.values() if m.run and m.gated and not m.passed]


class Verdict:
    """Result of ``dsv4q.check``. ``passed`` (bool), ``verdict`` ("pass",
    "FAIL", "ERROR", "not checkable": the reference is not finite), ``outputs`` {name: OutputVerdict}, ``rows`` (qualify's
    per-metric rows), ``json`` (the raw record), ``report()`` (text)."""

    def __init__(self, j):
        self.json = j
        self.op, self.case, self.profile, self.gates = j["op"], j["case"], j["profile"], j["gates"]
        self.verdict = j["verdict"]
        self.message = j.get("message", "")
        self.outputs = {o["name"]: OutputVerdict(o) for o in j.get("outputs", [])}
        self.rows = j.get("metrics", {})
        self.other_profiles = j.get("other_profiles", [])

    def profile_hint(self):
        """On a FAIL that passes under other profiles: a sentence naming them
        (the declared profile, not the kernel, may be the reason); else ""."""
        fits = [p for p in self.other_profiles if p["verdict"] == "pass"]
        if not fits:
            return ""
        best = fits[-1]   # the profile names run source, model, qat, exact: the last has fewest rounding points
        ev = ""
        if "metric" in best:
            ev = " (%s %s = %.4g <= bound %.4g under '%s')" % (best["output"], best["metric"], _num(best["value"]),
                                                               _num(best["bound"]), best["profile"])
        return ("hint: this candidate PASSES under profile %s%s, so the declared profile '%s' may be the reason:\n"
                "  pass profile='%s' if that is the precision your kernel implements ('exact' = plain FP32 math; 'qat' "
                "adds the FP8/FP4 simulations; 'model' also rounds index scores and attention probabilities to BF16; "
                "'source' also stores outputs in BF16: docs/boundaries.md)" % (
                    ", ".join("'%s'" % p["profile"] for p in fits), ev, self.profile, best["profile"]))

    @property
    def passed(self):
        return self.verdict == "pass"

    def __bool__(self):
        return self.passed

    def failures(self):
        """[(output name, MetricResult)] of every gated metric that failed."""
        return [(o.name, m) for o in self.outputs.values() for m in o.failures()]

    def report(self, all_metrics=False):
        lines = ["dsv4q %s: %s (profile %s, judged against oracle-f64/%s; level = oracle-f32 vs oracle-f64; "
                 "bound = factor * level + floor, gates %s)" % (self.op, "PASS" if self.passed else self.verdict,
                                                               self.profile, self.profile, self.gates)]
        if self.verdict == "ERROR":
            lines.append("  error: " + self.message)
            return "\n".join(lines)
        if self.verdict == "not checkable":   # the reference itself is not finite: nothing was judged
            lines.append("  not checkable: " + self.message)
            return "\n".join(lines)
        fails = self.failures()
        if fails:
            lines.append("  %d gated metric(s) over their bound:" % len(fails))
            for name, m in fails:
                o = self.outputs[name]
                ratio = m.value / m.bound if m.bound else float("inf")
                lines.append("    output %s (%s, shape %s): %s = %.4g > bound %.4g  (level %.4g; %.3gx the bound)" % (
                    name, o.dtype, list(o.shape), m.name, m.value, m.bound, m.level, ratio))
            for name in dict.fromkeys(n for n, _ in fails):
                w = self.outputs[name].worst
                if "coords" in w:
                    lines.append("    worst element of %s at index %s: candidate %.9g vs reference %.9g "
                                 "(|diff| %.4g)" % (name, tuple(w["coords"]), _num(w["candidate"]),
                                                    _num(w["reference"]),
                                                    abs(_num(w["candidate"]) - _num(w["reference"]))))
                    u = w.get("ulp")
                    if u and tuple(u["coords"]) != tuple(w["coords"]):
                        lines.append("    most ULPs of %s at index %s: candidate %.9g vs reference %.9g (%.4g ulps "
                                     "of %s)" % (name, tuple(u["coords"]), _num(u["candidate"]), _num(u["reference"]),
                                                 _num(u["ulps"]), self.outputs[name].dtype))
                elif "row" in w:
                    lines.append("    first differing row of %s: row %d: candidate %s vs reference %s" % (
                        name, w["row"], w["candidate"], w["reference"]))
                mm = self.outputs[name].mismatched
                if mm:
                    lines.append("    mismatched elements of %s: %d / %d (%.3g%%): %s" % (
                        name, mm["count"], mm["n"], 100.0 * mm["count"] / mm["n"] if mm["n"] else 0.0, mm["what"]))
        hint = self.profile_hint()
        if hint:
            lines.append("  " + hint.replace("\n", "\n  "))
        lines.append("  %-10s %-14s %11s %11s %11s  %s" % ("output", "metric", "value", "level", "bound", "verdict"))
        for o in self.outputs.values():
            for m in o.metrics.values():
                if not m.gated and not all_metrics:
                    continue
                if not m.run:
                    lines.append("  %-10s %-14s %11s %11s %11s  not run (no rerun= given)" % (o.name, m.name, "-", "-",
                                                                                           "-"))
                    continue
                lines.append("  %-10s %-14s %11.3e %11.3e %11s  %s" % (
                    o.name, m.name, m.value, m.level, "-" if m.bound is None else "%.3e" % m.bound, m.status))
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def __repr__(self):
        return "<dsv4q.Verdict %s %s>" % (self.op, self.verdict)
