"""dsv4q-import: convert an SGLang or vLLM tensor dump into a dsv4q capture.

    python -m dsv4q.importers sglang DUMP_DIR --model CKPT --out CAPTURE [--map FILE]
    python -m dsv4q.importers vllm RUN_DIR --model CKPT --out CAPTURE [--map FILE]
    dsv4q replay --model CKPT --capture CAPTURE

Exit 0 written, 2 bad input (the message names the file and what was
expected), an engine tensor name inside a layer that the map does not know or
one within a few edits of a known name (the message names the closest known
name), or PyTorch missing. The summary lists every other engine tensor name
the map did not know.
"""
from __future__ import annotations

import argparse
import sys

from .._lib import DSV4QError
from . import convert, load_map, require_torch


def main(argv=None):
    ap = argparse.ArgumentParser(prog="dsv4q-import", description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=["sglang", "vllm"])
    ap.add_argument("src", help="SGLang dumper directory (DIR/EXP_NAME) or vLLM run directory (with step_N/)")
    ap.add_argument("--model", required=True, help="the checkpoint directory the engine ran (config.json)")
    ap.add_argument("--out", required=True, help="capture directory to write (call-NNNN.safetensors)")
    ap.add_argument("--map", help="name-map JSON (default: the built-in DeepSeek V4 map of the engine)")
    ap.add_argument("--profile", default="source", help="the precision profile the engine claims")
    ap.add_argument("--boundary", default=None, help="boundary overrides, as dsv4q replay takes them")
    ap.add_argument("--engine-version", default="")
    ap.add_argument("--rank", type=int, default=0, help="SGLang: the rank to read")
    ap.add_argument("--device", default=None, help="vLLM: the device suffix to read (cuda_0)")
    a = ap.parse_args(argv)
    try:
        require_torch()   # before anything is read: the dumps are .pt files
        nm = load_map(a.map or a.engine)
        if a.engine == "sglang":
            from .sglang import read
            recs = read(a.src, rank=a.rank)
        else:
            from .vllm import read
            recs = read(a.src, device=a.device)
        s = convert(recs, nm, a.out, a.model, engine=a.engine, engine_version=a.engine_version, profile=a.profile,
                    boundary=a.boundary)
    except DSV4QError as e:
        print("dsv4q-import: %s" % e, file=sys.stderr)
        return 2
    print("dsv4q-import: %d call(s), %d stage tensor(s) -> %s (map %s); %d engine tensor(s) ignored by the map"
          % (s["calls"], s["tensors"], a.out, nm.path, s["ignored"]))
    if s["unmapped"]:
        print("dsv4q-import: %d engine tensor name(s) the map does not know (not imported):" % len(s["unmapped"]))
        for n, c in sorted(s["unmapped"].items()):
            print("  %s (%d)" % (n, c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
