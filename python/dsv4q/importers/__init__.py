"""Importers: an engine's own tensor dump -> a dsv4q capture (docs/captures.md),
so `dsv4q replay` qualifies the engine stage by stage.

Owns: the name-map file (engine tensor names -> stage tensor names,
docs/python.md "Name maps"), grouping a dump into calls, and writing one
safetensors file per call with the capture metadata. The readers of the two
formats live in sglang.py and vllm.py; each yields
``(call, name, tensor, tags)`` with ``call`` the engine's forward-step index.

Nothing is guessed silently: only names a rule matches are imported or
ignored (the built-in maps list what they ignore; none ends in a catch-all).
A name no rule matches is an error naming it and the closest known name when
it lies inside a decoder layer (the map's ``layer`` prefix) or is a near-miss
of a known name (a misspelled module would otherwise vanish and replay pass
with one stage fewer); any other is counted and listed in the summary. A
stage tensor given twice in a call with different values, token ids that
disagree, a non-float stage tensor or a call without token ids is an error
naming the file. The capture pins the checkpoint's config.json and weight
files (``checkpoint_sha256``, ``weights_sha256``), so replay refuses other
weights instead of blaming the engine.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from .._lib import DSV4QError

MAPS = Path(__file__).resolve().parent / "maps"
NEED_TORCH = "the importer needs PyTorch: pip install 'dsv4q[torch]'"
BUILTIN_MAPS = {"sglang": "sglang-deepseek-v4.json", "vllm": "vllm-deepseek-v4.json"}


class NameMap:
    """A name-map file: {"dsv4q_name_map": 1, "engine", "description",
    "layer": REGEX (optional), "rules": [{"match": REGEX, "tensors":
    [TEMPLATE, ...]} | {"match", "meta": "token_ids" | "position"} |
    {"match", "ignore": WHY}]}. The first rule whose regex matches the whole
    engine name wins; templates are str.format'ed with the regex's named
    groups (``L{layer}.attn.in``). ``layer`` matches the start of a name
    inside decoder layer N (named group ``layer``): such a name that no rule
    matches is an error (see :meth:`suspect`)."""

    def __init__(self, path):
        self.path = str(path)
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise DSV4QError("%s: cannot read name map: %s" % (path, e))
        if not isinstance(d, dict) or d.get("dsv4q_name_map") != 1 or not isinstance(d.get("rules"), list):
            raise DSV4QError("%s: not a dsv4q name map (need \"dsv4q_name_map\": 1 and a \"rules\" list)" % path)
        self.engine = d.get("engine", "")
        self.layer = None
        if "layer" in d:
            try:
                self.layer = re.compile(d["layer"])
            except (re.error, TypeError) as e:
                raise DSV4QError("%s: layer: bad regex: %s" % (path, e))
            if "layer" not in self.layer.groupindex:
                raise DSV4QError("%s: layer: the regex needs a named group (?P<layer>...)" % path)
        self.rules = []
        self.known = []     # spellings of every rule's names, for suggestions
        self._suspect = {}
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
            self.known.extend(k for k in spellings(r["match"]) if k not in self.known)

    def lookup(self, name):
        """("tensors", [stage names]) | ("meta", key) | ("ignore", why) | (None, None)."""
        for rx, kind, val in self.rules:
            m = rx.fullmatch(name)
            if m:
                if kind == "tensors":
                    return kind, [t.format(**m.groupdict()) for t in val]
                return kind, val
        return None, None

    def suspect(self, name):
        """For a name no rule matches: None when it is merely unknown (listed
        in the summary), else why it cannot be skipped, naming the closest
        known name: it lies inside a decoder layer (every module of a layer
        must be mapped or listed as ignored) or is within a few edits of a
        known name (a misspelling)."""
        if name in self._suspect:
            return self._suspect[name]
        m = self.layer.match(name) if self.layer else None
        layer = m.group("layer") if m else (re.search(r"\d+", name) or [None])[0]
        best, bd = None, None
        for k in self.known:
            cand = k.replace("{layer}", layer) if layer is not None else k
            d = distance(name, cand)
            if bd is None or d < bd:
                best, bd = cand, d
        why = None
        if m:
            why = "an unknown name inside layer %s" % layer
        elif bd is not None and bd <= max(2, len(name) // 20):
            why = "a near-miss of a known name"
        if why:
            why = "%s (no rule of the name map %s matches it); the closest known name is %s. Fix the name, " \
                  "or add a rule (\"ignore\" if it has no stage) to a copy of the map and pass it with --map" % (
                      why, self.path, best)
        self._suspect[name] = why
        return why


def spellings(pattern, limit=64):
    """Literal forms of the names a rule's regex matches, for naming the
    closest known name: the group ``layer`` becomes ``{layer}``, each choice
    of an alternation or optional part gives its own form, and any other
    variable part is a ``*`` (matching any run in :func:`distance`). A regex
    the parser cannot walk is returned as it is."""
    try:
        try:
            from re import _parser as sp      # Python 3.11+
        except ImportError:                   # pragma: no cover
            import sre_parse as sp
        tree = sp.parse(pattern)
        groups = getattr(tree, "state", None) or tree.pattern
        names = {v: k for k, v in groups.groupdict.items()}

        def seq(items):
            outs = [""]
            for op, av in items:
                outs = [o + a for o in outs for a in one(str(op), av)][:limit]
            return outs

        def one(op, av):
            if op == "LITERAL":
                return [chr(av)]
            if op == "AT":
                return [""]
            if op == "SUBPATTERN":
                if names.get(av[0]) == "layer":
                    return ["{layer}"]
                return seq(av[-1])
            if op == "BRANCH":
                return [x for b in av[1] for x in seq(b)][:limit]
            if op in ("MAX_REPEAT", "MIN_REPEAT") and av[0] == 0 and av[1] == 1:
                return [""] + seq(av[2])
            return ["*"]
        return [re.sub(r"\*+", "*", x) for x in seq(list(tree))]
    except Exception:
        return [pattern]


def distance(name, pat):
    """Edits (insert, delete, substitute, swap two neighbours) that turn
    ``name`` into ``pat``, where a ``*`` in ``pat`` stands for any run of
    characters at no cost."""
    n, m = len(name), len(pat)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        d[i][0] = i
    for j in range(1, m + 1):
        d[0][j] = d[0][j - 1] + (pat[j - 1] != "*")
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            if pat[j - 1] == "*":
                d[i][j] = min(d[i - 1][j], d[i][j - 1])
                continue
            v = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (name[i - 1] != pat[j - 1]))
            if i > 1 and j > 1 and name[i - 1] == pat[j - 2] and name[i - 2] == pat[j - 1] and pat[j - 2] != "*":
                v = min(v, d[i - 2][j - 2] + 1)
            d[i][j] = v
    return d[n][m]


def require_torch():
    """(torch, safetensors.torch.save_file), or a DSV4QError that says how
    to install them: the importers read .pt dumps and write safetensors."""
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError as e:
        raise DSV4QError("%s (%s)" % (NEED_TORCH, e))
    return torch, save_file


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


def weights_sha256(model_dir):
    """SHA-256 (64 lowercase hex) of the ``sha256sum`` listing of the
    checkpoint's weight files, as docs/captures.md defines ``weights_sha256``:
    one line ``<sha256>  <name>\\n`` per ``*.safetensors`` and ``*.index.json``
    of ``model_dir``, sorted by name in byte order."""
    names = sorted((p.name for p in Path(model_dir).iterdir()
                    if p.is_file() and (p.name.endswith(".safetensors") or p.name.endswith(".index.json"))),
                   key=lambda n: n.encode())
    listing = "".join("%s  %s\n" % (_sha256(Path(model_dir) / n), n) for n in names)
    return hashlib.sha256(listing.encode()).hexdigest()


def convert(records, name_map, out_dir, model_dir, *, engine, engine_version="", profile="source", boundary=None):
    """Write a capture from ``records`` (iterable of (call, name, tensor,
    origin)). Returns a summary dict: calls, tensors written, unmapped names
    (with counts), ignored count, the files written. A name no rule matches
    that :meth:`NameMap.suspect` flags is an error naming it."""
    torch, save_file = require_torch()

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
            why = name_map.suspect(name)
            if why:
                raise DSV4QError("%s: engine tensor %s is %s" % (origin, name, why))
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
    config_sha, weights_sha = _sha256(cfg), weights_sha256(model_dir)
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
        meta = {"dsv4q_capture_version": "1", "checkpoint_sha256": config_sha,
                "weights_sha256": weights_sha, "position": str(position),
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
