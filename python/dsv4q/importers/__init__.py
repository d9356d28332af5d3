"""Importers: an engine's own tensor dump -> a dsv4q capture (docs/captures.md),
so `dsv4q replay` qualifies the engine stage by stage.

Owns: the name-map file (engine tensor names -> stage tensor names,
docs/python.md "Name maps"), grouping a dump into calls, and writing one
safetensors file per call with the capture metadata. The readers of the two
formats live in sglang.py and vllm.py; each yields
``(call, name, tensor, tags)`` with ``call`` the engine's forward-step index.

Nothing is guessed silently: a tensor the map does not name is counted and
listed in the summary; a stage tensor given twice in a call with different
values, token ids that disagree, a non-float stage tensor or a call without
token ids is an error naming the file.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .._lib import DSV4QError

MAPS = Path(__file__).resolve().parent / "maps"
BUILTIN_MAPS = {"sglang": "sglang-deepseek-v4.json", "vllm": "vllm-deepseek-v4.json"}


class NameMap:
    """A name-map file: {"dsv4q_name_map": 1, "engine", "description",
    "rules": [{"match": REGEX, "tensors": [TEMPLATE, ...]} | {"match", "meta":
    "token_ids" | "position"} | {"match", "ignore": WHY}]}. The first rule
    whose regex matches the whole engine name wins; templates are
    str.format'ed with the regex's named groups (``L{layer}.attn.in``)."""

    def __init__(self, path):
        self.path = str(path)
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise DSV4QError("%s: cannot read name map: %s" % (path, e))
        if not isinstance(d, dict) or d.get("dsv4q_name_map") != 1 or not isinstance(d.get("rules"), list):
            raise DSV4QError("%s: not a dsv4q name map (need \"dsv4q_name_map\": 1 and a \"rules\" list)" % path)
        self.engine = d.get("engine", "")
        self.rules = []
        for i, r in enumerate(d["rules"]):
            kinds = [k for k in ("tensors", "meta", "ignore") if k in r]
            if "match" not in r or len(kinds) != 1:
                raise DSV4QError("%s: rules[%d]: needs \"match\" and exactly one of tensors, meta, ignore" % (path, i))
            try:
                rx = re.compile(r["match"])
            except re.error as e:
                raise DSV4QError("%s: rules[%d].match: bad regex: %s" % (path, i, e))
            if kinds[0] == "meta" and r["meta"] not in ("token_ids", "position"):
                raise DSV4QError("%s: rules[%d].meta must be token_ids or position" % (path, i))
            self.rules.append((rx, kinds[0], r[kinds[0]]))

    def lookup(self, name):
        """("tensors", [stage names]) | ("meta", key) | ("ignore", why) | (None, None)."""
        for rx, kind, val in self.rules:
            m = rx.fullmatch(name)
            if m:
                if kind == "tensors":
                    return kind, [t.format(**m.groupdict()) for t in val]
                return kind, val
        return None, None


def load_map(spec):
    """A NameMap from a path, or a built-in name ("sglang", "vllm")."""
    if spec in BUILTIN_MAPS:
        return NameMap(MAPS / BUILTIN_MAPS[spec])
    return NameMap(spec)


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def convert(records, name_map, out_dir, model_dir, *, engine, engine_version="", profile="source", boundary=None):
    """Write a capture from ``records`` (iterable of (call, name, tensor,
    origin)). Returns a summary dict: calls, tensors written, unmapped names
    (with counts), ignored count, the files written."""
    import torch
    from safetensors.torch import save_file

    model_dir = Path(model_dir)
    cfg = model_dir / "config.json"
    if not cfg.exists():
        raise DSV4QError("%s: no config.json (the checkpoint the engine ran)" % model_dir)
    calls = {}
    unmapped, ignored = {}, 0
    for call, name, t, origin in records:
        kind, val = name_map.lookup(name)
        c = calls.setdefault(call, {"tensors": {}, "token_ids": None, "position": None, "origin": {}})
        if kind is None:
            unmapped[name] = unmapped.get(name, 0) + 1
            continue
        if kind == "ignore":
            ignored += 1
            continue
        if not isinstance(t, torch.Tensor):
            raise DSV4QError("%s: %s is a %s, not a tensor" % (origin, name, type(t).__name__))
        t = t.detach().cpu()
        if kind == "meta":
            v = [int(x) for x in t.reshape(-1).tolist()]
            if val == "token_ids":
                if c["token_ids"] is not None and c["token_ids"] != v:
                    raise DSV4QError("%s: token ids of call %s disagree with %s" % (origin, call, c["origin"]["token_ids"]))
                c["token_ids"] = v
                c["origin"]["token_ids"] = origin
            else:
                p = min(v) if v else 0
                if c["position"] is not None and c["position"] != p:
                    raise DSV4QError("%s: position of call %s is %d, %s said %d" % (
                        origin, call, p, c["origin"]["position"], c["position"]))
                c["position"] = p
                c["origin"]["position"] = origin
            continue
        if not t.is_floating_point():
            raise DSV4QError("%s: %s has dtype %s; stage tensors are float (F32, BF16, F16, F64)" % (origin, name, t.dtype))
        t = t.contiguous()
        for sname in val:
            old = c["tensors"].get(sname)
            if old is not None and not (old.shape == t.shape and torch.equal(old, t.to(old.dtype))):
                raise DSV4QError("%s: %s maps to %s, already given differently by %s" % (
                    origin, name, sname, c["origin"][sname]))
            c["tensors"][sname] = t.clone() if len(val) > 1 else t   # one buffer per name (safetensors)
            c["origin"][sname] = origin
    if not calls:
        raise DSV4QError("no tensors found in the dump")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files, pos = [], 0
    for k, call in enumerate(sorted(calls)):
        c = calls[call]
        if c["token_ids"] is None:
            raise DSV4QError("call %s: no token ids in the dump (the name map's meta: token_ids rule matched nothing; "
                             "dump input_ids)" % call)
        position = c["position"] if c["position"] is not None else pos
        pos = position + len(c["token_ids"])
        meta = {"dsv4q_capture_version": "1", "checkpoint_sha256": _sha256(cfg), "position": str(position),
                "token_ids": json.dumps(c["token_ids"]), "engine": engine, "engine_version": engine_version or "",
                "profile": profile, "importer": "dsv4q.importers (%s)" % Path(name_map.path).name,
                "engine_call": str(call)}
        if boundary:
            meta["boundary"] = boundary
        f = out_dir / ("call-%04d.safetensors" % k)
        save_file(c["tensors"], str(f), metadata=meta)
        files.append(str(f))
    return {"calls": len(calls), "files": files, "tensors": sum(len(c["tensors"]) for c in calls.values()),
            "ignored": ignored, "unmapped": unmapped}
