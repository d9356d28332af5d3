"""Reader of an SGLang dumper directory (sglang/srt/debug_utils/dumper.py).

Format (as the dumper writes it): one ``.pt`` file per dumped tensor under
``DIR/EXP_NAME/``, named by its tags joined with ``___`` as ``key=value``:
``step=0___rank=0___dump_index=7___name=NAME___recompute_status=...___layer_id=3.pt``.
The file holds ``{"value": tensor, "meta": {...}}``; older dumpers saved
the bare tensor and used ``forward_pass_id`` instead of ``step``. The call
of a tensor is its ``step`` (``forward_pass_id``); ``rank`` selects one
tensor-parallel rank (the importer reads one rank: TP=1 dumps, or rank 0 of
a replicated tensor).
"""
from __future__ import annotations

from pathlib import Path

from .._lib import DSV4QError


def parse_name(stem):
    tags = {}
    for part in stem.split("___"):
        k, sep, v = part.partition("=")
        if not sep:
            return None
        tags[k] = v
    return tags


def read(src, rank=0):
    """Yield (call, name, tensor, origin) for every tensor of ``rank``."""
    import torch

    src = Path(src)
    files = sorted(src.rglob("*.pt")) if src.is_dir() else [src]
    if not files:
        raise DSV4QError("%s: no .pt files (an SGLang dumper directory: DUMPER_DIR/EXP_NAME)" % src)
    for f in files:
        tags = parse_name(f.stem)
        if tags is None or "name" not in tags:
            raise DSV4QError("%s: not an SGLang dumper file name (key=value parts joined by ___, with name=)" % f)
        if int(tags.get("rank", 0)) != rank:
            continue
        step = tags.get("step", tags.get("forward_pass_id"))
        if step is None or step == "None":
            raise DSV4QError("%s: no step (or forward_pass_id) tag: cannot tell which call it belongs to" % f)
        try:
            obj = torch.load(str(f), map_location="cpu", weights_only=False)
        except Exception as e:   # a truncated or foreign file: say which
            raise DSV4QError("%s: torch.load failed: %s" % (f, e))
        value = obj["value"] if isinstance(obj, dict) and "value" in obj else obj
        yield int(step), tags["name"], value, str(f)
